"""Where the node's NodeModelStore comes from: its own object (list + watch by name) and the CA
ConfigMap its spec names, and where its status goes.

``StoreApi`` is the seam (``KubeStoreApi`` over ``kube.Client``; tests use a fake). ``Source``
keeps both watches running and calls ``changed(obj, ca)`` whenever the object's generation, its
UID or the CA ConfigMap's data change. Status-only changes of the object (the plugin's own
writes among them) are not changes of anything the plugin applies, so they never call it back.
While the object does not exist the source keeps watching for it. Both are followed by
``kube.informer.Reflector``, the one list-and-watch loop every informer of ours runs (a watch
resumes from the last version seen, a 410 or a 504 "Too large resource version" lists again);
failures back off from 0.5 s doubling to 30 s.

What the plugin wrote may be gone while the object's UID and generation stay: after a list
other than the first (the server answered that the version the plugin held is gone or not
reached: its store went back, to an empty one or an older copy) or when the object's status
was emptied. Then ``stale`` is called, so the whole status is written again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from lightkube.resources.core_v1 import ConfigMap

import kube
from kube import informer as reflectors
from kube import resources
from openapi import install, wire
from openapi.kinds import nodemodelstore
from timing import backoff as backoffs

log = logging.getLogger(__name__)



class StoreApi(Protocol):
    async def list_store(self, name: str) -> tuple[wire.Obj | None, str]:
        """The NodeModelStore ``name`` (None when absent) and the list's resourceVersion."""
        ...

    def watch_store(self, name: str, resource_version: str) -> AsyncIterator[tuple[str, wire.Obj]]:
        """Events of that one object after ``resource_version``; ``kube.Expired`` when it is
        too old."""
        ...

    async def write_status(self, name: str, status: wire.Obj) -> None:
        """Replace what the plugin writes of ``status``; ``kube.NotFound`` when the object is
        gone."""
        ...

    async def list_config_map(self, namespace: str, name: str) -> tuple[wire.Obj | None, str]: ...

    def watch_config_map(
        self, namespace: str, name: str, resource_version: str
    ) -> AsyncIterator[tuple[str, wire.Obj]]: ...


class KubeStoreApi:
    """``StoreApi`` over ``kube.Client``: ``api`` serves ``worker.gpustack.ai`` and ``cluster``
    the ConfigMaps (one and the same client in a cluster)."""

    def __init__(self, api: kube.Client, cluster: kube.Client | None = None) -> None:
        self._api = api
        self._cluster = cluster or api

    async def list_store(self, name: str) -> tuple[wire.Obj | None, str]:
        found = await self._api.list(resources.NodeModelStore, fields={"metadata.name": name})
        items = [dict(item) for item in found.items]
        return (items[0] if items else None), found.resource_version

    async def watch_store(self, name: str, resource_version: str
                          ) -> AsyncIterator[tuple[str, wire.Obj]]:
        stream = self._api.watch(
            resources.NodeModelStore, fields={"metadata.name": name},
            resource_version=resource_version, bookmarks=True,
        )  # fmt: skip
        try:
            async for kind, obj in stream:
                yield kind, dict(obj)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def write_status(self, name: str, status: wire.Obj) -> None:
        await self._api.patch(resources.NodeModelStore.Status, name, {"status": status})

    async def list_config_map(self, namespace: str, name: str) -> tuple[wire.Obj | None, str]:
        found = await self._cluster.list(ConfigMap, namespace=namespace,
                                         fields={"metadata.name": name})
        items = [item.to_dict() for item in found.items]
        return (items[0] if items else None), found.resource_version

    async def watch_config_map(self, namespace: str, name: str, resource_version: str
                               ) -> AsyncIterator[tuple[str, wire.Obj]]:
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


Changed = Callable[[wire.Obj | None, CA], Awaitable[None]]
Take = Callable[[str, "wire.Obj | None"], Awaitable[None]]
"""``(how, obj)``: ``how`` is ``"LISTED"`` or the event's type, ``obj`` None when absent."""


class _One:
    """One object by name, as the reflector's ``ListWatch`` and ``Sink``."""

    def __init__(self, list_one: Callable[[], Awaitable[tuple[wire.Obj | None, str]]],
                 watch_one: Callable[[str], AsyncIterator[tuple[str, wire.Obj]]],
                 take: Take) -> None:
        self._list_one = list_one
        self._watch_one = watch_one
        self._take = take

    async def list(self) -> reflectors.Listed:
        obj, version = await self._list_one()
        return reflectors.Listed([] if obj is None else [obj], version)

    async def watch(self, resource_version: str) -> AsyncIterator[reflectors.Event]:
        async for kind, obj in self._watch_one(resource_version):
            yield reflectors.Event(kind, obj)

    async def replace(self, listed: reflectors.Listed) -> None:
        await self._take("LISTED", listed.items[0] if listed.items else None)

    async def apply(self, event: reflectors.Event) -> None:
        if event.type == "DELETED":
            await self._take("DELETED", None)
        elif event.type in ("ADDED", "MODIFIED"):
            await self._take(event.type, event.object)


class Source:
    def __init__(self, api: StoreApi, *, node: str, namespace: str, changed: Changed,
                 stale: Callable[[], None] = lambda: None,
                 retry_initial: float = reflectors.BACKOFF.initial,
                 retry_max: float = reflectors.BACKOFF.cap) -> None:
        self._api = api
        self._node = node
        self._namespace = namespace
        self._changed = changed
        self._stale = stale
        self._backoff = backoffs.Backoff(retry_initial, retry_max)
        self.object: wire.Obj | None = None
        self.ca = CA()
        self.listed = asyncio.Event()
        """Set once the object's first list answered (present or not)."""
        self.last_error = ""
        self._seen: tuple[str, int] | None = None
        self._ca_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def run(self) -> None:
        store = _One(lambda: self._api.list_store(self._node),
                     lambda version: self._api.watch_store(self._node, version),
                     self._take_store)
        try:
            await self._reflector(store, f"NodeModelStore {self._node}").run()
        finally:
            await self._stop_ca()

    def _reflector(self, one: _One, what: str,
                   failed: Callable[[], None] = lambda: None) -> reflectors.Reflector:
        def record() -> None:
            self.last_error = reflector.last_error
            failed()

        reflector = reflectors.Reflector(
            one, one, what=what, backoff=self._backoff,
            describe=lambda exc: f"{what}: {_why(exc)}", failed=record)
        return reflector

    async def _take_store(self, how: str, obj: wire.Obj | None) -> None:
        if how == "LISTED" and obj is None and not self.listed.is_set():
            log.info("NodeModelStore %s does not exist yet; waiting for the worker to create it",
                     self._node)
        if how == "DELETED":
            log.warning("NodeModelStore %s was deleted; waiting for the worker to recreate it",
                        self._node)
        relisted = how == "LISTED" and self.listed.is_set()
        emptied = how == "MODIFIED" and obj is not None and not obj.get("status")
        await self._take(obj)
        if how == "LISTED":
            self.listed.set()
        if obj is not None and (relisted or emptied):
            log.info("NodeModelStore %s was %s; writing its whole status again", self._node,
                     "listed again" if relisted else "left without a status")
            self._stale()

    async def _take(self, obj: wire.Obj | None) -> None:
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

    async def _follow_ca(self, obj: wire.Obj | None) -> None:
        name = nodemodelstore.ca_bundle_configmap(obj or {})
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
        async def take(how: str, cm: wire.Obj | None) -> None:
            await self._take_ca(name, cm, first)

        ca = _One(lambda: self._api.list_config_map(self._namespace, name),
                  lambda version: self._api.watch_config_map(self._namespace, name, version),
                  take)
        await self._reflector(ca, f"ConfigMap {self._namespace}/{name}", failed=first.set).run()

    async def _take_ca(self, name: str, cm: wire.Obj | None, first: asyncio.Event) -> None:
        data = (cm or {}).get("data") or {}
        pem = data.get(install.CA_BUNDLE_KEY) if isinstance(data, dict) else None
        fresh = CA(name, cm is not None, str(pem) if isinstance(pem, str) else None)
        changed = fresh != self.ca
        self.ca = fresh
        if not first.is_set():
            first.set()  # the store's own change notifies with it
            return
        if changed:
            await self._notify()


def _why(exc: BaseException) -> str:
    if isinstance(exc, kube.KubeError):
        return exc.message or exc.reason
    return f"{type(exc).__name__}: {exc}"
