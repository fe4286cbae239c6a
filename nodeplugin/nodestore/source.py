"""Where the node's NodeModelStore comes from: its own object (list + watch by name) and the CA
ConfigMap its spec names, and where its status goes.

``StoreApi`` is the seam (``KubeStoreApi`` over ``kube.Client``; tests use a fake). ``Source``
keeps both watches running and calls ``changed(obj, ca)`` whenever the object's generation, its
UID or the CA ConfigMap's data change. Status-only changes of the object (the plugin's own
writes among them) are not changes of anything the plugin applies, so they never call it back.
While the object does not exist the source keeps watching for it; failures back off from
0.5 s doubling to 30 s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from lightkube.resources.core_v1 import ConfigMap

import kube
from kube import resources

log = logging.getLogger(__name__)

CA_KEY = "ca.crt"
RETRY_INITIAL = 0.5
RETRY_MAX = 30.0
QUICK_END_SECONDS = 1.0

Obj = dict[str, Any]


class StoreApi(Protocol):
    async def list_store(self, name: str) -> tuple[Obj | None, str]:
        """The NodeModelStore ``name`` (None when absent) and the list's resourceVersion."""
        ...

    def watch_store(self, name: str, resource_version: str) -> AsyncIterator[tuple[str, Obj]]:
        """Events of that one object after ``resource_version``; ``kube.Expired`` when it is
        too old."""
        ...

    async def write_status(self, name: str, status: Obj) -> None:
        """Replace what the plugin writes of ``status``; ``kube.NotFound`` when the object is
        gone."""
        ...

    async def list_config_map(self, namespace: str, name: str) -> tuple[Obj | None, str]: ...

    def watch_config_map(
        self, namespace: str, name: str, resource_version: str
    ) -> AsyncIterator[tuple[str, Obj]]: ...


class KubeStoreApi:
    """``StoreApi`` over ``kube.Client``: ``api`` serves ``worker.gpustack.ai`` and ``cluster``
    the ConfigMaps (one and the same client in a cluster)."""

    def __init__(self, api: kube.Client, cluster: kube.Client | None = None) -> None:
        self._api = api
        self._cluster = cluster or api

    async def list_store(self, name: str) -> tuple[Obj | None, str]:
        found = await self._api.list(resources.NodeModelStore, fields={"metadata.name": name})
        items = [dict(item) for item in found.items]
        return (items[0] if items else None), found.resource_version

    async def watch_store(self, name: str, resource_version: str
                          ) -> AsyncIterator[tuple[str, Obj]]:
        stream = self._api.watch(
            resources.NodeModelStore, fields={"metadata.name": name},
            resource_version=resource_version, bookmarks=True,
        )  # fmt: skip
        try:
            async for kind, obj in stream:
                yield kind, dict(obj)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def write_status(self, name: str, status: Obj) -> None:
        await self._api.patch(resources.NodeModelStore.Status, name, {"status": status})

    async def list_config_map(self, namespace: str, name: str) -> tuple[Obj | None, str]:
        found = await self._cluster.list(ConfigMap, namespace=namespace,
                                         fields={"metadata.name": name})
        items = [item.to_dict() for item in found.items]
        return (items[0] if items else None), found.resource_version

    async def watch_config_map(self, namespace: str, name: str, resource_version: str
                               ) -> AsyncIterator[tuple[str, Obj]]:
        stream = self._cluster.watch(
            ConfigMap, namespace=namespace, fields={"metadata.name": name},
            resource_version=resource_version, bookmarks=True,
        )  # fmt: skip
        try:
            async for kind, obj in stream:
                yield kind, obj.to_dict()
        finally:
            await stream.aclose()  # type: ignore[attr-defined]


@dataclasses.dataclass(frozen=True, slots=True)
class CA:
    """The CA ConfigMap as last read: ``name`` (empty when the spec names none), whether it
    exists, and its ``ca.crt``."""

    name: str = ""
    found: bool = False
    pem: str | None = None


Changed = Callable[[Obj | None, CA], Awaitable[None]]


class Source:
    def __init__(self, api: StoreApi, *, node: str, namespace: str, changed: Changed,
                 retry_initial: float = RETRY_INITIAL, retry_max: float = RETRY_MAX) -> None:
        self._api = api
        self._node = node
        self._namespace = namespace
        self._changed = changed
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self.object: Obj | None = None
        self.ca = CA()
        self.listed = asyncio.Event()
        """Set once the object's first list answered (present or not)."""
        self.last_error = ""
        self._seen: tuple[str, int] | None = None
        self._ca_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def run(self) -> None:
        try:
            await _retrying(self._watch_store, f"NodeModelStore {self._node}", self)
        finally:
            await self._stop_ca()

    async def _watch_store(self) -> None:
        obj, version = await self._api.list_store(self._node)
        if obj is None and not self.listed.is_set():
            log.info("NodeModelStore %s does not exist yet; waiting for the worker to create it",
                     self._node)
        await self._take(obj)
        self.listed.set()
        async for kind, event in self._api.watch_store(self._node, version):
            if kind == "DELETED":
                log.warning("NodeModelStore %s was deleted; waiting for the worker to recreate "
                            "it", self._node)
                await self._take(None)
            elif kind in ("ADDED", "MODIFIED"):
                await self._take(event)

    async def _take(self, obj: Obj | None) -> None:
        meta = (obj or {}).get("metadata") or {}
        seen = None if obj is None else (str(meta.get("uid") or ""), int(meta.get("generation")
                                                                           or 0))
        self.object = obj
        if seen == self._seen:
            return  # a status write (ours or not) or a metadata-only change: nothing to apply
        self._seen = seen
        await self._follow_ca(obj)
        await self._notify()

    async def _notify(self) -> None:
        async with self._lock:
            await self._changed(self.object, self.ca)

    # --- the CA ConfigMap ---------------------------------------------------------------

    async def _follow_ca(self, obj: Obj | None) -> None:
        hub = ((obj or {}).get("spec") or {}).get("hub") or {}
        name = str(hub.get("caBundleConfigMap") or "") if isinstance(hub, dict) else ""
        if name == self.ca.name and (self._ca_task is not None or not name):
            return
        await self._stop_ca()
        self.ca = CA(name)
        if not name:
            return
        first = asyncio.Event()
        self._ca_task = asyncio.create_task(self._run_ca(name, first), name=f"watch CA {name}")
        # Apply the spec with its CA, not without it: wait for the first read (or failure).
        waiter = asyncio.ensure_future(first.wait())
        await asyncio.wait({waiter, self._ca_task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()

    async def _stop_ca(self) -> None:
        if self._ca_task is not None:
            self._ca_task.cancel()
            await asyncio.gather(self._ca_task, return_exceptions=True)
            self._ca_task = None

    async def _run_ca(self, name: str, first: asyncio.Event) -> None:
        async def once() -> None:
            cm, version = await self._api.list_config_map(self._namespace, name)
            await self._take_ca(name, cm, first)
            async for kind, event in self._api.watch_config_map(self._namespace, name, version):
                if kind == "DELETED":
                    await self._take_ca(name, None, first)
                elif kind in ("ADDED", "MODIFIED"):
                    await self._take_ca(name, event, first)

        await _retrying(once, f"ConfigMap {self._namespace}/{name}", self, failed=first.set)

    async def _take_ca(self, name: str, cm: Obj | None, first: asyncio.Event) -> None:
        data = (cm or {}).get("data") or {}
        pem = data.get(CA_KEY) if isinstance(data, dict) else None
        fresh = CA(name, cm is not None, str(pem) if isinstance(pem, str) else None)
        changed = fresh != self.ca
        self.ca = fresh
        if not first.is_set():
            first.set()  # the store's own change notifies with it
            return
        if changed:
            await self._notify()


async def _retrying(
    body: Callable[[], Awaitable[None]], what: str, owner: Source,
    failed: Callable[[], None] = lambda: None,
) -> None:
    """Run ``body`` again and again: at once after an expired version or a watch that ran its
    course, backing off after a failure (and after a watch that ends at once, which must not
    spin)."""
    delay = owner._retry_initial
    loop = asyncio.get_running_loop()
    while True:
        began = loop.time()
        try:
            await body()
            if loop.time() - began >= QUICK_END_SECONDS:
                delay = owner._retry_initial
                continue
        except kube.Expired:
            log.info("%s: resource version expired; listing again", what)
            continue
        except asyncio.CancelledError:
            raise
        except kube.KubeError as exc:
            owner.last_error = f"{what}: {exc.message or exc.reason}"
            failed()
            log.warning("%s; retrying in %.1fs", owner.last_error, delay)
        except Exception as exc:
            owner.last_error = f"{what}: {type(exc).__name__}: {exc}"
            failed()
            log.exception("reading %s failed; retrying in %.1fs", what, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, owner._retry_max)
