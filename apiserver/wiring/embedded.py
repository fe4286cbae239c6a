"""What the API server runs besides serving: ``controllers.assembly.build`` for the mode
``--controllers`` names, over an in-process client as the worker.

Returns start and stop hooks for the app's lifespan (after storage starts, before it closes).
The read side (the NodeView: the NodeModelStore index, the progress view and the artifacts'
``status.nodes`` counts, and the artifact informer admission reads) always runs; the controllers
run as the mode says: all of them (``embedded``), the ones that need the in-process client
(``external``: the node stores and the prefetches' pins, the rest run as ``python -m
controllers``), or none (``none``).

What belongs to the server stays here: the artifact facts admission reads, the worker's token
from the static token file (standalone), the Lease kept in the server's own store when
processes share it (standalone), and the record of the hub's verifications kept there too
(``proofs.py``).

In a cluster the controllers start once the worker identity is learned
(``controllers.runtime.identity.Learning``): at once when the first attempt succeeds, else when a
later one does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib
from collections.abc import Awaitable, Callable, Mapping

import kube
from apiserver.auth import static
from apiserver.auth import worker as workers
from apiserver.endpoints import podwebhook
from apiserver.flags import config
from apiserver.registry import build
from apiserver.wiring import inprocess, leases, manifests, proofs
from controllers import assembly
from controllers.runtime import identity as identities
from controllers.runtime import informer, leader
from openapi import keys, sources, wire
from openapi.kinds import nodemodelstore
from timing import clock as clocks

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]
TokenSource = Callable[[], Awaitable[str | None]]

MODES = {"embedded": assembly.Mode.EMBEDDED, "external": assembly.Mode.SERVER_PART,
         "none": assembly.Mode.VIEW_ONLY}


@dataclasses.dataclass
class Hooks:
    controllers: assembly.ControllerSet
    """The NodeView, the artifact informer and the controllers of this mode."""
    start: list[Hook] = dataclasses.field(default_factory=list)
    stop: list[Hook] = dataclasses.field(default_factory=list)

    @property
    def artifacts(self) -> informer.Informer:
        """The artifact informer every replica runs (admission reads it)."""
        return self.controllers.artifacts


class InformerArtifacts:
    """``admission.facts.Artifacts`` over the artifact informer: unknown until it synced."""

    def __init__(self, artifacts: informer.Informer) -> None:
        self._artifacts = artifacts

    def source_of(self, namespace: str, name: str) -> str | None:
        if not self._artifacts.synced.is_set():
            return None
        found = self._artifacts.get(namespace, name)
        source = ((found or {}).get("spec") or {}).get("source") or {}
        return next((kind for kind in sources.KINDS if kind in source), None)


class InformerGovernance:
    """``admission.facts.Governance`` over the informers every replica runs: the pool layer's
    (``assembly.PoolInformers``), the NodeModelStores (the NodeView's) and the artifacts."""

    def __init__(self, found: assembly.ControllerSet) -> None:
        self._pools = found.pools
        self._stores = found.view.informer
        self._artifacts = found.artifacts

    def ready(self) -> bool:
        return all(each.synced.is_set() for each in (
            *self._pools.all(), self._stores, self._artifacts))

    def binding(self, namespace: str, name: str) -> wire.Obj | None:
        return self._pools.bindings.get(namespace, name)

    def plugin_nodes(self) -> list[tuple[str, str]]:
        return sorted((wire.key_of(obj)[1], nodemodelstore.store(obj))
                      for obj in self._stores.items())

    def labels(self, node: str) -> Mapping[str, str]:
        if self._pools.nodes is None:
            return {keys.HOSTNAME: node}
        held = wire.mapping(self._pools.nodes.get("", node), "metadata", "labels")
        return {str(k): str(v) for k, v in held.items()}

    def prefetches(self, namespace: str) -> list[wire.Obj]:
        return [obj for obj in self._pools.prefetches.items()
                if wire.key_of(obj)[0] == namespace]

    def artifact(self, namespace: str, name: str) -> wire.Obj | None:
        return self._artifacts.get(namespace, name)


class PodFacts:
    """``endpoints.podwebhook.PodFacts`` over the artifact informer and the warm nodes every
    replica watches (``assembly.ControllerSet.warm``); ``kubernetes_version`` is the cluster's
    (None standalone: no scheduling gates, nothing to release them)."""

    def __init__(self, controllers: assembly.ControllerSet,
                 kubernetes_version: Callable[[], tuple[int, int] | None] | None = None) -> None:
        self._artifacts = controllers.artifacts
        self._warm = controllers.warm
        self._version = kubernetes_version

    async def artifacts_read(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                await self._artifacts.synced.wait()
        except TimeoutError:
            return False
        return True

    async def nodes_read(self, timeout: float) -> bool:
        return await self._warm.wait_synced(timeout)

    def artifact(self, namespace: str, name: str) -> wire.Readable | None:
        return self._artifacts.get(namespace, name)

    def warm_nodes(self, digest: str) -> list[str]:
        return self._warm.warm_nodes(digest)

    def gates_usable(self) -> bool:
        found = self._version() if self._version is not None else None
        return found is not None and found >= podwebhook.GATES_SINCE


def worker_token(token_file: pathlib.Path, username: str) -> TokenSource:
    """The worker's own bearer token from the static token file (what the plugins' shared
    ``--downloads-token-file`` holds in standalone mode), re-read when the file changes."""
    seen: dict[str, object] = {}

    async def read() -> str | None:
        try:
            stamp = token_file.stat().st_mtime_ns
            if seen.get("stamp") != stamp:
                entries = static.parse(token_file.read_text(), source=str(token_file))
                seen["token"] = next((e.token for e in entries if e.name == username), None)
                seen["stamp"] = stamp
        except (OSError, static.TokenFileError) as exc:
            log.warning("cannot read the worker token: %s", type(exc).__name__)
            return None
        token = seen.get("token")
        return token if isinstance(token, str) else None

    return read


def store_leadership(settings: config.Settings, registry: build.Registry,
                     clock: clocks.Clock) -> leader.AlwaysLeader | leader.LeaseElector:
    """Without a cluster: processes sharing a store (replicas on one etcd, ``--processes`` on etcd
    or on one SQLite file) elect one leader on a Lease kept in that store; a single server
    process on its own SQLite file always leads."""
    cs = settings.controller_settings
    if settings.storage.backend != "etcd" and settings.storage.processes == 1:
        return leader.AlwaysLeader()
    return leader.LeaseElector(
        leases.StoreLeases(registry.storage), clock, namespace=cs.namespace, name=cs.lease_name,
        identity=cs.identity or leader.identity(), timing=cs.lease)


def build_hooks(settings: config.Settings, registry: build.Registry, *,
                cluster_client: kube.Client | None = None,
                clock: clocks.Clock | None = None,
                identity: Callable[[], workers.WorkerIdentity] | None = None,
                learning: identities.Learning | None = None) -> Hooks:
    """``identity``: the worker identity as the server knows it (learned in a cluster); the
    controllers write as it. ``learning`` learns it: they start once it did (no ``learning``:
    the identity is configured, they start at once)."""
    clock = clock or clocks.SystemClock()
    fixed = workers.WorkerIdentity.configured(settings.worker_username)
    current = identity or (lambda: fixed)
    api = inprocess.RegistryClient(registry, worker=current)
    standalone = cluster_client is None
    # None: in a cluster the projected token for the plugins' audience (--plugin-token-file,
    # never the server's API token); standalone without a token file, none
    token = (worker_token(settings.token_auth_file, settings.worker_username)
             if standalone and settings.token_auth_file is not None else None)
    mode = MODES[settings.controllers]
    found = assembly.build(mode, assembly.Inputs(
        config=settings.controller_settings, clock=clock, api=api, writer=api,
        kube=cluster_client, state_dir=settings.data_dir / "controllers",
        leadership=store_leadership(settings, registry, clock) if standalone else None,
        plugin_token=token, ledger=proofs.StoreLedger(registry.storage),
        manifests=manifests.StoreManifests(registry.storage), live_progress=True))
    hooks = Hooks(controllers=found)

    async def start_view() -> None:
        found.start_view()

        async def plug_in() -> None:
            await found.view.index.wait_synced()
            registry.progress_view.view = found.view.progress
            registry.copies_view.view = found.view.copies
            registry.node_counts.view = found.view.counts

        waiting.append(asyncio.create_task(plug_in(), name="progress view"))

    async def start_controllers() -> None:
        if not found.names():
            return
        if learning is None or learning.known:
            found.start_controllers()
            return
        log.warning("the controllers start once the worker identity is learned (%s)",
                    learning.reason)
        waiting.append(asyncio.create_task(learning.then(found.start_controllers),
                                            name="the controllers: waiting to start"))

    async def stop() -> None:
        registry.progress_view.view = None
        registry.copies_view.view = None
        registry.node_counts.view = None
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await found.stop()

    waiting: list[asyncio.Task[None]] = []
    hooks.start.extend([start_view, start_controllers])
    hooks.stop.append(stop)
    if not found.names():
        log.info("controllers: %s (none run in this process)", settings.controllers)
    return hooks
