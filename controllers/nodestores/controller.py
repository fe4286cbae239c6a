"""Node stores: one NodeModelStore per node that runs the plugin, its ``spec`` the worker's.

A node runs the plugin when its CSINode lists the driver ``model.csi.gpustack.ai`` (in a
cluster) or when ``--node`` names it (standalone). For each, the controller

- creates the object (named after the node, with an ownerReference to the Node in a cluster so
  deleting the Node collects it) and recreates it when it is deleted while the plugin still runs
  there;
- never deletes one while the plugin is installed: every plugin restart takes the driver out of
  CSINode for a moment, and a node the plugin left keeps a stale object whose Ready condition
  stops changing; once the CSIDriver object itself is gone (the plugin left the cluster), it
  deletes every NodeModelStore and creates none until the CSIDriver is back;
- writes its ``spec``: the settings (``storesettings``: watermarks, download limits, hub) with
  the winning ModelStore's fields merged over them and ``spec.store`` naming it (``pools``), and
  the node's kubelet thresholds (``spec.kubelet``) read from its configz when the object is written
  and every 30 minutes. A failed read keeps the last reading; a node never read has none, and
  its plugin assumes kubelet's defaults and says so. ``spec.pinned`` and ``spec.evict`` are left
  as they are.

Every node is checked again every minute (and at once when its CSINode, its object, its labels,
a ModelStore or the settings change), so a settings change reaches every spec within a minute.
Only the worker inside the API server runs this (``client.Writer``): clients cannot create
NodeModelStores.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from controllers.nodestores import nodes as plugin_nodes
from controllers.nodestores import pools as poollayer
from controllers.nodestores import settings as storesettings
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import errors, informer
from openapi import resources as contract
from openapi import volume, wire
from openapi.kinds import nodemodelstore
from timing import clock as clocks

log = logging.getLogger(__name__)

RESYNC_SECONDS = 60.0
KUBELET_SECONDS = 1800.0



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


class NodeStores:
    name = "nodestores"

    def __init__(
        self,
        api: clients.ReadWrite,
        stores: informer.Informer,
        nodes: plugin_nodes.Nodes,
        settings: Settings,
        clock: clocks.Clock,
        *,
        configz: plugin_nodes.Configz | None = None,
        pools: poollayer.Pools | None = None,
        driver: plugin_nodes.RunningDriver | None = None,
        concurrency: int = 2,
    ) -> None:
        self._api = api
        self._stores = stores
        self._nodes = nodes
        self._settings = settings
        self._clock = clock
        self._configz = configz
        self._pools = pools
        self._driver = driver
        self._readings: dict[str, wire.Obj] = {}
        self._read_at: dict[str, float] = {}
        self.controller: runtime.Controller[str] = runtime.Controller(
            self.name, self.reconcile, clock, keys=self._keys, concurrency=concurrency)
        stores.add_handler(self._store_changed)
        nodes.add_handler(self.controller.enqueue)
        settings.add_handler(self._settings_changed)
        if pools is not None:
            pools.add_handler(self._pool_changed)
        if driver is not None:
            driver.add_handler(self._settings_changed)
        self.deleted = 0
        self.created = 0
        self.updated = 0

    # manager.Runnable ---------------------------------------------------------------------

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._nodes.run(), name="node stores: where the plugin runs")]
        if self._driver is not None:
            tasks.append(asyncio.create_task(self._driver.run(), name="node stores: CSIDriver"))
        try:
            await self.controller.run()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        self.controller.stop()

    def plugin_nodes(self) -> set[str]:
        """The nodes where the plugin runs, as this controller sees them now."""
        return self._nodes.names()

    # triggers -----------------------------------------------------------------------------

    def _keys(self) -> list[str]:
        return sorted(self._nodes.names() | {clients.key_of(o)[1] for o in self._stores.items()})

    def _store_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        _, name = clients.key_of(new or old or {})
        if name:
            self.controller.enqueue(name)

    def _pool_changed(self, node: str) -> None:
        if node:
            self.controller.enqueue(node)
        else:
            self._settings_changed()

    def _settings_changed(self) -> None:
        for name in self._keys():
            self.controller.enqueue(name)

    # one node -----------------------------------------------------------------------------

    async def reconcile(self, name: str) -> runtime.Result:
        await self._stores.synced.wait()
        await self._nodes.wait_synced()
        current = self._stores.get("", name)
        if self._driver is not None and self._driver.present() is False:
            return await self._withdraw(name, current)
        if current is None and name not in self._nodes.names():
            return runtime.DONE
        desired = self._settings.current().spec()
        if self._pools is not None:
            await self._pools.synced()
            desired = poollayer.merged(desired, self._pools.winner(name))
        kubelet = await self._kubelet(name)
        if kubelet is not None:
            desired["kubelet"] = kubelet
        try:
            if current is None:
                return await self._create(name, desired)
            spec = nodemodelstore.spec(current)
            pins = nodemodelstore.pinned(current)
            if pins:
                desired["pinned"] = pins
            evicting = nodemodelstore.evict(current)  # the pins controller's, like pinned
            if evicting:
                desired["evict"] = evicting
            if spec != desired:
                updated = dict(current, spec=desired)
                await self._api.update(clients.NODE_MODEL_STORES, updated)
                self.updated += 1
                log.info("NodeModelStore %s: spec updated", name)
        except errors.Conflict:
            return runtime.Result(retry=True)  # the informer brings the fresh copy
        return runtime.Result(requeue_after=RESYNC_SECONDS)

    async def _withdraw(self, name: str, current: wire.Obj | None) -> runtime.Result:
        """The CSIDriver is gone: the plugin left the cluster, so its node stores go too."""
        if current is None:
            return runtime.DONE
        try:
            await self._api.delete(clients.NODE_MODEL_STORES, "", name)
        except errors.NotFound:
            return runtime.DONE
        self.deleted += 1
        log.info("NodeModelStore %s deleted: the CSIDriver %s does not exist", name,
                 volume.DRIVER)
        return runtime.DONE

    async def _create(self, name: str, spec: wire.Obj) -> runtime.Result:
        owners = await self._nodes.owner(name)
        if owners is None:
            log.info("NodeModelStore %s: the Node does not exist; not created", name)
            return runtime.Result(requeue_after=RESYNC_SECONDS)
        metadata: wire.Obj = {"name": name}
        if owners:
            metadata["ownerReferences"] = owners
        body = {"apiVersion": contract.GROUP_VERSION, "kind": contract.NODE_MODEL_STORE.kind,
                "metadata": metadata, "spec": spec}
        await self._api.create(clients.NODE_MODEL_STORES, body)
        self.created += 1
        log.info("NodeModelStore %s created", name)
        return runtime.Result(requeue_after=RESYNC_SECONDS)

    async def _kubelet(self, name: str) -> wire.Obj | None:
        """The node's kubelet thresholds: read when due (every 30 minutes), the last good
        reading otherwise; None when never read."""
        if self._configz is None:
            return None
        now = self._clock.monotonic()
        last = self._read_at.get(name)
        if last is None or now - last >= KUBELET_SECONDS:
            self._read_at[name] = now
            try:
                self._readings[name] = plugin_nodes.kubelet_spec(await self._configz.read(name))
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


