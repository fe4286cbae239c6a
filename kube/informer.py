"""The one list-and-watch loop (client-go's reflector) every informer of ours runs: the
controllers' informers (``controllers/runtime/informer.py``), the node plugin's artifact copy
(``nodeplugin/artifacts.py``) and its own NodeModelStore and CA ConfigMap
(``nodeplugin/nodestore/source.py``).

``Reflector.run`` lists, hands the items to its ``Sink``, then watches from the list's
resourceVersion and hands it every event (bookmarks only move that version on). When a watch
ends, it watches again from the last version seen, at once after a watch that ran its course,
after a backoff when it ended at once; after a failure it backs off and resumes the same way
(the list again when the list is what failed). Only a version the server cannot serve lists
again, at once, and the list replaces the sink's whole state: an expired one (410, compacted, or
from before the server's store went back) or one it has not reached (504 "Too large resource
version": its store went back, or it lags). The backoff (``BACKOFF``: 0.5 s doubling per
consecutive failure to 30 s) starts over after a list or a watch that ran its course. What is
listed and watched (a client, paging, selectors, how a 410 is spelled) is the ``ListWatch``'s;
what the events mean (a cache, indexes, handlers, a callback) is the ``Sink``'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from kube import errors
from openapi import wire
from timing import backoff as backoffs
from timing import clock as clocks

log = logging.getLogger(__name__)

QUICK_END_SECONDS = 1.0
"""A watch that ends sooner than this ended "at once": the next one waits out a backoff."""
BACKOFF = backoffs.Backoff(0.5, 30.0)
"""Consecutive failed lists and watches (or watches that ended at once): 0.5 s doubling to 30 s."""


@dataclasses.dataclass(frozen=True, slots=True)
class Listed:
    items: list[wire.Obj]
    resource_version: str


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    type: str
    """ADDED, MODIFIED, DELETED or BOOKMARK."""
    object: wire.Obj


class ListWatch(Protocol):
    async def list(self) -> Listed:
        """Every object (all pages) and the list's resourceVersion."""
        ...

    def watch(self, resource_version: str) -> AsyncIterator[Event]:
        """Events after ``resource_version``; raises one of the reflector's ``expired`` errors
        when that version is gone."""
        ...


class Sink(Protocol):
    async def replace(self, listed: Listed) -> None:
        """A complete list: the copy becomes exactly these items."""
        ...

    async def apply(self, event: Event) -> None:
        """One change (never a bookmark)."""
        ...


def version_of(obj: wire.Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def describe(exc: BaseException) -> str:
    """Why a list or watch failed, for ``last_error`` (a kube error's message, never a token)."""
    if isinstance(exc, errors.KubeError):
        return exc.message or exc.reason
    return str(exc) or type(exc).__name__


class Reflector:
    """Keeps a ``Sink`` current from a ``ListWatch`` until cancelled.

    ``expired``: the errors meaning "list again" (``kube.Expired`` and
    ``kube.TooLargeResourceVersion`` by default; a client of our own may spell them otherwise);
    ``describe`` words a failure for ``last_error``; ``failed`` is called after each failure (a
    waiter that must not wait for ever, say)."""

    def __init__(self, source: ListWatch, sink: Sink, *, what: str,
                 clock: clocks.Clock | None = None, backoff: backoffs.Backoff = BACKOFF,
                 expired: tuple[type[BaseException], ...] = (
                     errors.Expired, errors.TooLargeResourceVersion),
                 describe: Callable[[BaseException], str] = describe,
                 failed: Callable[[], None] = lambda: None,
                 quick_end: float = QUICK_END_SECONDS) -> None:
        self._source = source
        self._sink = sink
        self.what = what
        self._clock = clock or clocks.SystemClock()
        self._backoff = backoff
        self._expired = expired
        self._describe = describe
        self._failed = failed
        self._quick_end = quick_end
        self.resource_version = ""
        self.last_error = ""
        """Why the last list or watch failed; empty after a list that succeeded."""
        self.lists = 0
        """How many complete lists were made."""

    async def run(self) -> None:
        failures = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list, failures = False, 0
                began = self._clock.monotonic()
                await self._watch()
                if self._clock.monotonic() - began >= self._quick_end:
                    failures = 0
                    continue  # a watch that ran its course: resume at once
                # a watch that ends at once, again and again, must not spin: back off
            except asyncio.CancelledError:
                raise
            except self._expired as exc:
                log.info("%s: resource version %s cannot be served (%s); listing again",
                         self.what, self.resource_version, self._describe(exc))
                need_list = True
                continue
            except Exception as exc:
                self.last_error = self._describe(exc)
                self._failed()
                log.warning("%s: %s; retrying in %.1fs", self.what, self.last_error,
                            self._backoff.delay(failures + 1))
            failures += 1
            await clocks.sleep(self._clock, self._backoff.delay(failures))

    async def _list(self) -> None:
        listed = await self._source.list()
        await self._sink.replace(listed)
        self.resource_version = listed.resource_version
        self.lists += 1
        self.last_error = ""

    async def _watch(self) -> None:
        async for event in self._source.watch(self.resource_version):
            seen = version_of(event.object)
            if event.type != "BOOKMARK":
                await self._sink.apply(event)
            if seen:
                self.resource_version = seen
