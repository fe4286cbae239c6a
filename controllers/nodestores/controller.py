"""Node stores: one NodeModelStore per node that runs the plugin, its ``spec`` the worker's.

A node runs the plugin when its CSINode lists the driver ``model.csi.gpustack.ai`` (in a
cluster) or when ``--node`` names it (standalone). For each, the controller

- creates the object (named after the node, with an ownerReference to the Node in a cluster so
  deleting the Node collects it) and recreates it when it is deleted while the plugin still runs
  there;
- never deletes one: every plugin restart takes the driver out of CSINode for a moment, and a
  node the plugin left keeps a stale object whose Ready condition stops changing;
- writes its ``spec``: the settings (``storesettings``: watermarks, download limits, hub) and the
  node's kubelet thresholds (``spec.kubelet``) read from its configz when the object is written
  and every 30 minutes. A failed read keeps the last reading; a node never read has none, and
  its plugin assumes kubelet's defaults and says so. ``spec.pinned`` is left as it is.

Every node is checked again every minute (and at once when its CSINode, its object or the
settings change), so a settings change reaches every spec within a minute. Only the worker
inside the API server runs this (``client.Writer``): clients cannot create NodeModelStores.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from controllers.nodestores import settings as storesettings
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import errors, informer
from openapi import quantity
from openapi import resources as contract
from timing import clock as clocks

log = logging.getLogger(__name__)

DRIVER = "model.csi.gpustack.ai"
RESYNC_SECONDS = 60.0
KUBELET_SECONDS = 1800.0
MAX_THRESHOLD = 64

Obj = clients.Obj


class Api(clients.Client, clients.Writer, Protocol):
    """What the controller writes through: the in-process client."""


class Nodes(Protocol):
    """Where the plugin runs."""

    def names(self) -> set[str]: ...

    async def run(self) -> None:
        """Keep ``names`` current (an informer), until cancelled."""
        ...

    async def wait_synced(self) -> None: ...

    def add_handler(self, handler: Callable[[str], None]) -> None:
        """Call ``handler(node)`` when whether it runs the plugin may have changed."""
        ...

    async def owner(self, name: str) -> list[Obj] | None:
        """The object's ownerReferences: ``[]`` when there is no Node to own it (standalone),
        None when the Node should exist and does not (nothing is created then)."""
        ...


class StaticNodes:
    """Standalone: the nodes ``--node`` names."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = set(names)

    def names(self) -> set[str]:
        return set(self._names)

    async def run(self) -> None:
        return None

    async def wait_synced(self) -> None:
        return None

    def add_handler(self, handler: Callable[[str], None]) -> None:
        return None

    async def owner(self, name: str) -> list[Obj] | None:
        return []


def lists_driver(csinode: Obj) -> bool:
    drivers = (csinode.get("spec") or {}).get("drivers") or []
    return any(isinstance(d, dict) and d.get("name") == DRIVER for d in drivers)


class CsiNodes:
    """In a cluster: CSINodes listing the driver (an informer), the Node read for its UID."""

    def __init__(self, csinodes: informer.Informer, api: clients.Client) -> None:
        self._csinodes = csinodes
        self._api = api

    def names(self) -> set[str]:
        return {clients.key_of(obj)[1] for obj in self._csinodes.items() if lists_driver(obj)}

    async def run(self) -> None:
        # Run by the controller itself, not the manager: CSINodes that cannot be read (RBAC, an
        # old cluster) hold up the node stores only, never the resolver.
        await self._csinodes.run()

    async def wait_synced(self) -> None:
        await self._csinodes.synced.wait()

    def add_handler(self, handler: Callable[[str], None]) -> None:
        def changed(old: Obj | None, new: Obj | None) -> None:
            _, name = clients.key_of(new or old or {})
            if name:
                handler(name)

        self._csinodes.add_handler(changed)

    async def owner(self, name: str) -> list[Obj] | None:
        try:
            node = await self._api.get(clients.NODES, "", name)
        except errors.NotFound:
            return None
        uid = str((node.get("metadata") or {}).get("uid") or "")
        if not uid:
            return None
        return [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]


class Configz(Protocol):
    async def read(self, node: str) -> Obj:
        """The node's ``/api/v1/nodes/{node}/proxy/configz`` answer."""
        ...


class Settings(Protocol):
    def current(self) -> storesettings.StoreSettings: ...

    def add_handler(self, handler: Callable[[], None]) -> None: ...


class FixedSettings:
    def __init__(self, value: storesettings.StoreSettings) -> None:
        self._value = value

    def current(self) -> storesettings.StoreSettings:
        return self._value

    def add_handler(self, handler: Callable[[], None]) -> None:
        return None


def kubelet_spec(answer: Obj) -> Obj:
    """``spec.kubelet`` from a configz answer: ``evictionHard``'s ``nodefs.available`` and
    ``imagefs.available`` and ``imageGCHighThresholdPercent``; a value the plugin could not read
    is left out (and logged), so nothing that fails its check is written."""
    config = answer.get("kubeletconfig") or answer.get("kubeletConfig") or {}
    hard = config.get("evictionHard") or {}
    found: Obj = {}
    for field, key in (("nodefsAvailable", "nodefs.available"),
                       ("imagefsAvailable", "imagefs.available")):
        text = str(hard.get(key) or "").strip() if isinstance(hard, dict) else ""
        if not text:
            found[field] = ""
            continue
        try:
            quantity.threshold(text)
            if len(text) > MAX_THRESHOLD:
                raise quantity.QuantityError("too long")
        except quantity.QuantityError as exc:
            log.warning("configz: evictionHard %s %r unusable (%s); left out", key, text[:80], exc)
            continue
        found[field] = text
    gc = config.get("imageGCHighThresholdPercent")
    if isinstance(gc, int) and not isinstance(gc, bool) and 0 <= gc <= 100:
        found["imageGCHighThresholdPercent"] = gc
    return found


class NodeStores:
    name = "nodestores"

    def __init__(
        self,
        api: Api,
        stores: informer.Informer,
        nodes: Nodes,
        settings: Settings,
        clock: clocks.Clock,
        *,
        configz: Configz | None = None,
        workers: int = 2,
    ) -> None:
        self._api = api
        self._stores = stores
        self._nodes = nodes
        self._settings = settings
        self._clock = clock
        self._configz = configz
        self._readings: dict[str, Obj] = {}
        self._read_at: dict[str, float] = {}
        self.controller: runtime.Controller[str] = runtime.Controller(
            self.name, self.reconcile, clock, keys=self._keys, workers=workers)
        stores.add_handler(self._store_changed)
        nodes.add_handler(self.controller.enqueue)
        settings.add_handler(self._settings_changed)
        self.created = 0
        self.updated = 0

    # runtime.Runnable ---------------------------------------------------------------------

    async def run(self) -> None:
        nodes = asyncio.create_task(self._nodes.run(), name="node stores: where the plugin runs")
        try:
            await self.controller.run()
        finally:
            nodes.cancel()
            await asyncio.gather(nodes, return_exceptions=True)

    def stop(self) -> None:
        self.controller.stop()

    # triggers -----------------------------------------------------------------------------

    def _keys(self) -> list[str]:
        return sorted(self._nodes.names() | {clients.key_of(o)[1] for o in self._stores.items()})

    def _store_changed(self, old: Obj | None, new: Obj | None) -> None:
        _, name = clients.key_of(new or old or {})
        if name:
            self.controller.enqueue(name)

    def _settings_changed(self) -> None:
        for name in self._keys():
            self.controller.enqueue(name)

    # one node -----------------------------------------------------------------------------

    async def reconcile(self, name: str) -> runtime.Result:
        await self._stores.synced.wait()
        await self._nodes.wait_synced()
        current = self._stores.get("", name)
        if current is None and name not in self._nodes.names():
            return runtime.DONE
        desired = self._settings.current().spec()
        kubelet = await self._kubelet(name)
        if kubelet is not None:
            desired["kubelet"] = kubelet
        try:
            if current is None:
                return await self._create(name, desired)
            spec = current.get("spec") or {}
            if "pinned" in spec:
                desired["pinned"] = spec["pinned"]
            if spec != desired:
                updated = dict(current, spec=desired)
                await self._api.update(clients.NODE_MODEL_STORES, updated)
                self.updated += 1
                log.info("NodeModelStore %s: spec updated", name)
        except errors.Conflict:
            return runtime.Result(retry=True)  # the informer brings the fresh copy
        return runtime.Result(requeue_after=RESYNC_SECONDS)

    async def _create(self, name: str, spec: Obj) -> runtime.Result:
        owners = await self._nodes.owner(name)
        if owners is None:
            log.info("NodeModelStore %s: the Node does not exist; not created", name)
            return runtime.Result(requeue_after=RESYNC_SECONDS)
        metadata: Obj = {"name": name}
        if owners:
            metadata["ownerReferences"] = owners
        body = {"apiVersion": contract.GROUP_VERSION, "kind": contract.NODE_MODEL_STORE.kind,
                "metadata": metadata, "spec": spec}
        await self._api.create(clients.NODE_MODEL_STORES, body)
        self.created += 1
        log.info("NodeModelStore %s created", name)
        return runtime.Result(requeue_after=RESYNC_SECONDS)

    async def _kubelet(self, name: str) -> Obj | None:
        """The node's kubelet thresholds: read when due (every 30 minutes), the last good
        reading otherwise; None when never read."""
        if self._configz is None:
            return None
        now = self._clock.monotonic()
        last = self._read_at.get(name)
        if last is None or now - last >= KUBELET_SECONDS:
            self._read_at[name] = now
            try:
                self._readings[name] = kubelet_spec(await self._configz.read(name))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                kept = "keeping the last reading" if name in self._readings else (
                    "its plugin assumes kubelet's defaults")
                log.warning("cannot read node %s's kubelet configuration (%s); %s", name,
                            _why(exc), kept)
        return self._readings.get(name)


def _why(exc: BaseException) -> str:
    message = getattr(exc, "message", "") or str(exc) or type(exc).__name__
    return str(message)[:200]


Reader = Callable[[str], Awaitable[Obj]]


class KubeConfigz:
    """``Configz`` over ``kube.Client.node_configz``."""

    def __init__(self, read: Reader) -> None:
        self._read = read

    async def read(self, node: str) -> Obj:
        return await self._read(node)
