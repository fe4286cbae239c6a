"""An informer: a local copy of one resource kept by list-then-watch, with change handlers.

It lists, then watches from the list's resourceVersion (bookmarks move it on). When the watch
ends it watches again from the last version seen; when that version is gone (410) or the watch
fails it lists again and reports the difference (adds, updates, deletes) as events, after a
backoff on repeated failures. Every ``resync`` seconds handlers see every object again as an
update, so controllers re-check what nothing changed. Handlers run on the event loop and must
not block: they enqueue keys.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from controllers import client as clients
from controllers import errors, queue
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
Obj = clients.Obj
# (old, new): old is None for an add, new is None for a delete.
Handler = Callable[[Obj | None, Obj | None], None]
IndexFunc = Callable[[Obj], Iterable[str]]


def version_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


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
        backoff: queue.Backoff = queue.INFORMER_BACKOFF,
    ) -> None:
        self._api = api
        self.resource = resource
        self._clock = clock
        self._namespace = namespace
        self._selector = label_selector
        self._resync = resync
        self._backoff = backoff
        self._objects: dict[Key, Obj] = {}
        self._handlers: list[Handler] = []
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[Key]]] = {}
        self._indexed: dict[str, dict[Key, tuple[str, ...]]] = {}
        self.synced = asyncio.Event()
        self.last_error = ""

    # reading ------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._objects.get((namespace, name))

    def keys(self) -> list[Key]:
        return list(self._objects)

    def items(self) -> list[Obj]:
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

    def by_index(self, name: str, value: str) -> list[Obj]:
        keys = self._indices[name].get(value, set())
        return [self._objects[key] for key in keys if key in self._objects]

    def index_keys(self, name: str, value: str) -> list[Key]:
        return list(self._indices[name].get(value, set()))

    # keeping the copy ---------------------------------------------------------------------

    def _index(self, name: str, key: Key, obj: Obj | None) -> None:
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

    def _apply(self, key: Key, new: Obj | None) -> None:
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

    def _replace(self, items: list[Obj]) -> None:
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
        failures = 0
        resync_task = asyncio.create_task(self._resync_loop()) if self._resync else None
        try:
            while True:
                try:
                    version = await self._list()
                    failures = 0
                    await self._watch(version)
                except asyncio.CancelledError:
                    raise
                except errors.Expired:
                    log.debug("%s: watch expired; listing again", self.resource.plural)
                    continue
                except Exception as exc:
                    failures += 1
                    self.last_error = _describe(exc)
                    delay = self._backoff.delay(failures)
                    log.warning("%s informer: %s; retrying in %.1fs", self.resource.plural,
                                self.last_error, delay)
                    await clocks.sleep(self._clock, delay)
        finally:
            if resync_task is not None:
                resync_task.cancel()
                await asyncio.gather(resync_task, return_exceptions=True)

    async def _list(self) -> str:
        listed = await self._api.list(self.resource, namespace=self._namespace,
                                      label_selector=self._selector)
        self._replace(listed.items)
        self.last_error = ""
        self.synced.set()
        return listed.resource_version

    async def _watch(self, version: str) -> None:
        while True:
            stream = self._api.watch(self.resource, resource_version=version,
                                     namespace=self._namespace, label_selector=self._selector)
            async for event in stream:
                seen = version_of(event.object)
                if event.type == "BOOKMARK":
                    version = seen or version
                    continue
                key = clients.key_of(event.object)
                self._apply(key, None if event.type == "DELETED" else event.object)
                version = seen or version

    async def _resync_loop(self) -> None:
        assert self._resync is not None
        while True:
            await clocks.sleep(self._clock, self._resync)
            self.resync_now()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, errors.ApiError):
        return f"HTTP {exc.code}: {exc.message}"
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")
