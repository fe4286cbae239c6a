"""An informer: a local copy of one resource kept by list-then-watch, with change handlers.

The list-and-watch loop is ``kube.informer.Reflector``, the one every informer of ours runs (it
lists, watches from the list's resourceVersion with bookmarks moving it on, watches again from
the last version seen when a watch ends or fails, lists again on a 410, backs off on the clock
after repeated failures). This module keeps the copy: a relist is reported as the difference
(adds, updates, deletes) as events. Every ``resync`` seconds handlers see every object again as
an update, so controllers re-check what nothing changed. Handlers run on the event loop and must
not block: they enqueue keys.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable

from controllers.runtime import client as clients
from controllers.runtime import errors
from kube import informer as reflectors
from openapi import wire
from timing import backoff as backoffs
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
# (old, new): old is None for an add, new is None for a delete.
Handler = Callable[[wire.Obj | None, wire.Obj | None], None]
IndexFunc = Callable[[wire.Obj], Iterable[str]]


version_of = reflectors.version_of

RESYNC_SECONDS = 600.0
"""The resync of the informers whose objects a controller re-checks on its own schedule (the
artifacts, the claims): every ten minutes every object is handed to the handlers again."""


class Informer:
    def __init__(
        self,
        api: clients.Client,
        resource: clients.Resource,
        clock: clocks.Clock,
        *,
        namespace: str = "",
        label_selector: str = "",
        resync: float | None = None,
        backoff: backoffs.Backoff = reflectors.BACKOFF,
    ) -> None:
        self._api = api
        self.resource = resource
        self._clock = clock
        self._namespace = namespace
        self._selector = label_selector
        self._resync = resync
        self._objects: dict[Key, wire.Obj] = {}
        self._handlers: list[Handler] = []
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[Key]]] = {}
        self._indexed: dict[str, dict[Key, tuple[str, ...]]] = {}
        self.synced = asyncio.Event()
        self._reflector = reflectors.Reflector(
            _ListWatch(self), _Sink(self), what=f"{resource.plural} informer", clock=clock,
            backoff=backoff,
            expired=(errors.Expired, errors.TooLarge), describe=_describe)

    @property
    def last_error(self) -> str:
        """Why the last list or watch failed; empty once a list succeeds."""
        return self._reflector.last_error

    # reading ------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> wire.Obj | None:
        return self._objects.get((namespace, name))

    def keys(self) -> list[Key]:
        return list(self._objects)

    def items(self) -> list[wire.Obj]:
        return list(self._objects.values())

    def __len__(self) -> int:
        return len(self._objects)

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)
        for obj in self._objects.values():
            handler(None, obj)

    def add_index(self, name: str, func: IndexFunc) -> None:
        self._indexers[name] = func
        self._indices[name] = {}
        self._indexed[name] = {}
        for key, obj in self._objects.items():
            self._index(name, key, obj)

    def by_index(self, name: str, value: str) -> list[wire.Obj]:
        keys = self._indices[name].get(value, set())
        return [self._objects[key] for key in keys if key in self._objects]

    def index_keys(self, name: str, value: str) -> list[Key]:
        return list(self._indices[name].get(value, set()))

    # keeping the copy ---------------------------------------------------------------------

    def _index(self, name: str, key: Key, obj: wire.Obj | None) -> None:
        values = tuple(sorted(set(self._indexers[name](obj)))) if obj is not None else ()
        before = self._indexed[name].get(key, ())
        if values == before:
            return
        index = self._indices[name]
        for value in before:
            members = index.get(value)
            if members is not None:
                members.discard(key)
                if not members:
                    del index[value]
        for value in values:
            index.setdefault(value, set()).add(key)
        if values:
            self._indexed[name][key] = values
        else:
            self._indexed[name].pop(key, None)

    def _apply(self, key: Key, new: wire.Obj | None) -> None:
        old = self._objects.get(key)
        if new is None:
            if old is None:
                return
            del self._objects[key]
        else:
            self._objects[key] = new
        for name in self._indexers:
            self._index(name, key, new)
        for handler in self._handlers:
            try:
                handler(old, new)
            except Exception:
                log.exception("%s handler failed", self.resource.plural)

    def _replace(self, items: list[wire.Obj]) -> None:
        """A fresh list: report what it adds, changes and drops compared with the copy."""
        fresh = {clients.key_of(obj): obj for obj in items}
        for key in [k for k in self._objects if k not in fresh]:
            self._apply(key, None)
        for key, obj in fresh.items():
            old = self._objects.get(key)
            if old is None or version_of(old) != version_of(obj):
                self._apply(key, obj)

    def resync_now(self) -> None:
        for obj in list(self._objects.values()):
            for handler in self._handlers:
                try:
                    handler(obj, obj)
                except Exception:
                    log.exception("%s handler failed", self.resource.plural)

    # running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        resync_task = asyncio.create_task(self._resync_loop()) if self._resync else None
        try:
            await self._reflector.run()
        finally:
            if resync_task is not None:
                resync_task.cancel()
                await asyncio.gather(resync_task, return_exceptions=True)

    async def _resync_loop(self) -> None:
        assert self._resync is not None
        while True:
            await clocks.sleep(self._clock, self._resync)
            self.resync_now()


class _ListWatch:
    def __init__(self, owner: Informer) -> None:
        self._owner = owner

    async def list(self) -> reflectors.Listed:
        o = self._owner
        return await o._api.list(o.resource, namespace=o._namespace, label_selector=o._selector)

    async def watch(self, resource_version: str) -> AsyncIterator[reflectors.Event]:
        o = self._owner
        async for event in o._api.watch(o.resource, resource_version=resource_version,
                                        namespace=o._namespace, label_selector=o._selector):
            yield event


class _Sink:
    def __init__(self, owner: Informer) -> None:
        self._owner = owner

    async def replace(self, listed: reflectors.Listed) -> None:
        self._owner._replace(listed.items)
        self._owner.synced.set()

    async def apply(self, event: reflectors.Event) -> None:
        key = clients.key_of(event.object)
        self._owner._apply(key, None if event.type == "DELETED" else event.object)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, errors.ApiError):
        return f"HTTP {exc.code}: {exc.message}"
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")
