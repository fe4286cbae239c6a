"""Where the plugin runs (``Nodes``: the CSINodes listing the driver in a cluster, the ``--node``
names standalone) and what each node's kubelet says (``Configz``, ``kubelet_spec``): the inputs of
the node stores controller that are not our objects."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from controllers.runtime import client as clients
from controllers.runtime import errors, informer
from openapi import placement, quantity, volume, wire

log = logging.getLogger(__name__)

MAX_THRESHOLD = 64



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

    async def owner(self, name: str) -> list[wire.Obj] | None:
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

    async def owner(self, name: str) -> list[wire.Obj] | None:
        return []


class CsiNodes:
    """In a cluster: CSINodes listing the driver (an informer), the Node read for its UID."""

    def __init__(self, csinodes: informer.Informer, api: clients.Client) -> None:
        self._csinodes = csinodes
        self._api = api

    def names(self) -> set[str]:
        return {clients.key_of(obj)[1] for obj in self._csinodes.items()
                if placement.lists_driver(obj)}

    async def run(self) -> None:
        # Run by the controller itself, not the manager: CSINodes that cannot be read (RBAC, an
        # old cluster) hold up the node stores only, never the resolver.
        await self._csinodes.run()

    async def wait_synced(self) -> None:
        await self._csinodes.synced.wait()

    def add_handler(self, handler: Callable[[str], None]) -> None:
        def changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            _, name = clients.key_of(new or old or {})
            if name:
                handler(name)

        self._csinodes.add_handler(changed)

    async def owner(self, name: str) -> list[wire.Obj] | None:
        try:
            node = await self._api.get(clients.NODES, "", name)
        except errors.NotFound:
            return None
        uid = str((node.get("metadata") or {}).get("uid") or "")
        if not uid:
            return None
        return [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]


class Configz(Protocol):
    async def read(self, node: str) -> wire.Obj:
        """The node's ``/api/v1/nodes/{node}/proxy/configz`` answer."""
        ...


def kubelet_spec(answer: wire.Obj) -> wire.Obj:
    """``spec.kubelet`` from a configz answer: ``evictionHard``'s ``nodefs.available`` and
    ``imagefs.available`` and ``imageGCHighThresholdPercent``; a value the plugin could not read
    is left out (and logged), so nothing that fails its check is written."""
    config = answer.get("kubeletconfig") or answer.get("kubeletConfig") or {}
    hard = config.get("evictionHard") or {}
    found: wire.Obj = {}
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


Reader = Callable[[str], Awaitable[wire.Obj]]


class KubeConfigz:
    """``Configz`` over ``kube.Client.node_configz``."""

    def __init__(self, read: Reader) -> None:
        self._read = read

    async def read(self, node: str) -> wire.Obj:
        return await self._read(node)


class Driver(Protocol):
    """Whether the CSIDriver object of the plugin exists."""

    def present(self) -> bool | None:
        """True or False once read; None while unknown (nothing is deleted then)."""
        ...

    def add_handler(self, handler: Callable[[], None]) -> None:
        """Call ``handler()`` when it appears or goes."""
        ...


class RunningDriver(Driver, Protocol):
    async def run(self) -> None:
        """Keep ``present`` current, until cancelled."""
        ...


class CsiDriver:
    """In a cluster: the CSIDriver ``model.csi.gpustack.ai`` (an informer on CSIDrivers, run by
    the controller). Its absence is the plugin leaving the cluster (the chart removes it with
    ``modelManager.enabled=false``); a CSINode dropping the driver for a moment (a plugin
    restart) is not."""

    def __init__(self, drivers: informer.Informer) -> None:
        self._drivers = drivers

    def present(self) -> bool | None:
        if not self._drivers.synced.is_set():
            return None
        return self._drivers.get("", volume.DRIVER) is not None

    def add_handler(self, handler: Callable[[], None]) -> None:
        def changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            if wire.key_of(new or old or {})[1] == volume.DRIVER:
                handler()

        self._drivers.add_handler(changed)

    async def run(self) -> None:
        await self._drivers.run()
