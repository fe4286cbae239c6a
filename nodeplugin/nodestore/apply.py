"""Applying the node's spec to the running plugin, and what the rest of it reads back.

``Applier.changed`` is the ``source.Source`` callback: it checks the spec (``spec.parse``), turns
the named CA ConfigMap into a file the hub client trusts, and then, all or nothing, gives the
materializer its hub settings and download limits, the capacity ledger its high watermark (after
the capacity rule), and collection its watermarks and pins. A spec that fails any check applies
nothing, refuses new downloads (``gate.Gate``) and stops collection: the earlier spec's
watermarks do not stay in force. ``NodeState`` holds the verdict for the status report.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from durable import disk
from hub import config as hub_config
from hub import errors as hub_errors
from nodeplugin.cache import layout
from nodeplugin.materialize import capacity, download, interface, local
from nodeplugin.nodestore import gate as gates
from nodeplugin.nodestore import source, watermarks
from nodeplugin.nodestore import spec as specs
from openapi import install

log = logging.getLogger(__name__)

CA_FILE = "hub-ca-bundle.pem"
MakeHub = Callable[[hub_config.HubConfig, specs.NodeSpec], interface.Materializer]


@dataclasses.dataclass
class NodeState:
    """What the plugin knows of its NodeModelStore (read by the reporter and collection)."""

    present: bool = False
    """The object exists (status can be written)."""
    uid: str = ""
    observed_generation: int | None = None
    applied: specs.NodeSpec | None = None
    """The spec in force; None before one applied, and while the current one fails."""
    effective: watermarks.Effective | None = None
    invalid: str | None = None
    """Why the current spec fails its check; None when it applies."""


class Applier:
    def __init__(
        self,
        cache: layout.Layout,
        *,
        gate: gates.Gate,
        ledger: capacity.Capacity,
        kubelet_dir: str,
        state: NodeState,
        namespace: str,
        make_hub: MakeHub | None = None,
        notify: Callable[[], None] = lambda: None,
        applied: Callable[[], Awaitable[None]] | None = None,
        default_ca_bundle: str | None = None,
    ) -> None:
        """``default_ca_bundle`` (the plugin's ``--ca-bundle``, a deploy-time setting) is
        trusted while the spec names no CA ConfigMap."""
        self._cache = cache
        self._gate = gate
        self._ledger = ledger
        self._kubelet_dir = kubelet_dir
        self.state = state
        self._namespace = namespace
        self._make_hub = make_hub
        self._notify = notify
        self._applied = applied
        self._ca_written: str | None = None
        self._default_ca = default_ca_bundle

    async def changed(self, obj: dict[str, Any] | None, ca: source.CA) -> None:
        state = self.state
        if obj is None:
            state.present = False
            state.uid = ""
            self._notify()
            return
        meta = obj.get("metadata") or {}
        state.present = True
        state.uid = str(meta.get("uid") or "")
        generation = meta.get("generation")
        state.observed_generation = generation if isinstance(generation, int) else None
        try:
            node = specs.parse(obj)
            hub = specs.hub_config_of(node.hub, ca_bundle=self._ca_file(node.hub, ca))
            await self._apply_hub(hub, node)
        except specs.SpecError as err:
            state.invalid, state.applied, state.effective = err.message, None, None
            self._gate.refuse(f"the node's spec fails the plugin's check: {err.message}")
            log.error("NodeModelStore generation %s fails its check, nothing of it applied and "
                      "no download starts: %s", generation, err.message)
        else:
            usage = self._ledger.usage()
            shared = watermarks.shares_filesystem(self._cache.root, self._kubelet_dir)
            effective = watermarks.effective(node.high_percent, node.low_percent, node.kubelet,
                                             total_bytes=usage.total_bytes, shared=shared)
            self._ledger.high_percent = effective.high_percent
            state.invalid, state.applied, state.effective = None, node, effective
            self._gate.open()
            log.info("applied NodeModelStore generation %s: watermarks %d/%d%% (in force "
                     "%d/%d%%), %d requests, %d bytes/s", generation, node.high_percent,
                     node.low_percent, effective.high_percent, effective.low_percent,
                     node.concurrency, node.bytes_per_second)
            if self._applied is not None:
                await self._applied()
        self._notify()

    def _ca_file(self, hub: specs.Hub, ca: source.CA) -> str | None:
        """The file holding the named ConfigMap's ``ca.crt`` (SpecError when it is missing or
        not a PEM bundle), or without one the deploy-time bundle, if any."""
        name = hub.ca_bundle_configmap
        if not name:
            return self._default_ca
        where = f"ConfigMap {self._namespace}/{name}"
        if ca.name != name or not ca.found:
            raise specs.SpecError(f"spec.hub.caBundleConfigMap: {where} does not exist")
        if not ca.pem or not ca.pem.strip():
            raise specs.SpecError(f"spec.hub.caBundleConfigMap: {where} has no key "
                                  f"{install.CA_BUNDLE_KEY}")
        try:
            ssl.create_default_context(cadata=ca.pem)
        except (ssl.SSLError, ValueError):
            raise specs.SpecError(f"spec.hub.caBundleConfigMap: {where} key "
                                  f"{install.CA_BUNDLE_KEY} is not a PEM bundle of "
                                  "certificates") from None
        path = self._cache.state_file(CA_FILE)
        if self._ca_written != ca.pem or not os.path.exists(path):
            disk.write_atomic(path, ca.pem.encode(), mode=0o644)
            self._ca_written = ca.pem
        return str(path)

    async def _apply_hub(self, hub: hub_config.HubConfig, node: specs.NodeSpec) -> None:
        inner = self._gate.inner
        try:
            if isinstance(inner, download.HubMaterializer):
                await inner.reconfigure(hub, concurrency=node.concurrency,
                                        bytes_per_second=node.bytes_per_second)
            elif isinstance(inner, local.LocalImporter):
                hub_config.check(hub)  # imports reach no hub, but the spec is checked alike
            elif self._make_hub is not None:
                self._gate.replace(self._make_hub(hub, node))
        except hub_errors.HubError as err:
            raise specs.SpecError(f"spec.hub: {specs.field_names(err.message)}") from None
