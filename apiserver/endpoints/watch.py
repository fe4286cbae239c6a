"""Watch responses: JSON lines of events, periodic bookmarks, and the timeout that ends a stream.

Each watcher reads the one shared storage broadcast through its ResourceStore iterator. An event
is encoded once per rendering (a byte splice for plain JSON, one decode for Table /
PartialObjectMetadata) and the line is shared by every watcher asking for the same rendering, so
the work per watcher is its filter and its write. A watch without bookmarks reads its events in
the response's own task (``live_lines``); one with bookmarks also needs timer ticks, so a pump
task feeds it through a queue (``lines``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import random
from collections.abc import AsyncIterator, Callable, Hashable
from typing import Any

import orjson
from starlette import responses

from apiserver import errors
from apiserver.endpoints import negotiation, table
from apiserver.registry import codec, events, options
from apiserver.storage import interface
from openapi import resources


@dataclasses.dataclass(frozen=True, slots=True)
class Tuning:
    bookmark_interval: float = 60.0
    """How often a watch asking for bookmarks gets one while nothing else happens."""
    default_timeout: float = 1800.0
    """Like Go's minRequestTimeout (1800 s) times 1 + rand: streams without timeoutSeconds end in
    30 to 60 minutes, spreading reconnects."""
    max_backlog: int = 10_000
    """Events queued for a client that does not read; past this the watch ends with a 410 (only
    watches with bookmarks queue: see ``live_lines``)."""


DEFAULT = Tuning()
# Encoded lines kept for sharing; live watchers ask for a line right after its commit, so the
# last few hundred events are all that is ever looked up.
SHARED_LINES = 512


class SharedLines:
    """Event lines already encoded, shared by every watcher with the same rendering.

    Keyed by the rendering and the event's identity (type, key, revision); an entry also holds
    the stored bytes it was made from and is used only for that very bytes object, so a record
    rebuilt with other content (a selector transition's DELETED) never reads another's line.
    Runs on the event loop thread only.
    """

    def __init__(self, size: int = SHARED_LINES) -> None:
        self._size = size
        self._lines: dict[Hashable, tuple[bytes, bytes]] = {}

    def line(self, key: Hashable, source: bytes, make: Callable[[], bytes]) -> bytes:
        found = self._lines.get(key)
        if found is not None and found[0] is source:
            return found[1]
        made = make()
        if found is None and len(self._lines) >= self._size:
            del self._lines[next(iter(self._lines))]  # oldest first (dicts keep insertion order)
        self._lines[key] = (source, made)
        return made


_SHARED = SharedLines()


class Encoder:
    """Turns registry watch events into the bytes of one line each, for one reply shape."""

    def __init__(self, info: resources.ResourceInfo, target: negotiation.Target,
                 include: str = "Metadata", shared: SharedLines | None = None) -> None:
        self.info = info
        self.target = target
        self.include = include
        self._first_table = True
        self._shared = _SHARED if shared is None else shared

    def _line(self, kind: str, obj: bytes) -> bytes:
        return b'{"type":"' + kind.encode() + b'","object":' + obj + b"}\n"

    def bookmark(self, revision: int, *, initial_events_end: bool = False) -> bytes:
        metadata: dict[str, Any] = {"resourceVersion": str(revision)}
        if initial_events_end:
            metadata["annotations"] = {options.INITIAL_EVENTS_END: "true"}
        view = self.target.view
        if view is negotiation.View.OBJECT:
            obj: dict[str, Any] = {"kind": self.info.kind,
                                   "apiVersion": self.info.group_version, "metadata": metadata}
        elif view is negotiation.View.TABLE:
            obj = {"kind": "Table", "apiVersion": self.target.api_version, "metadata": metadata,
                   "columnDefinitions": [], "rows": []}
        else:
            obj = {"kind": "PartialObjectMetadata", "apiVersion": self.target.api_version,
                   "metadata": metadata}
        return self._line("BOOKMARK", orjson.dumps(obj))

    def encode(self, event: events.WatchEvent) -> bytes:
        if event.type == "ERROR":
            return self._line("ERROR", orjson.dumps(event.status))
        if event.type == "BOOKMARK":
            return self.bookmark(event.revision, initial_events_end=event.initial_events_end)
        record = event.record
        if record is None:
            raise ValueError(f"a {event.type} watch event needs its record")
        view = self.target.view
        with_columns = view is negotiation.View.TABLE and self._first_table
        if view is negotiation.View.TABLE:
            self._first_table = False
        include = self.include if view is negotiation.View.TABLE else ""
        key = (view, self.target.api_version, include, with_columns, self.info.kind, event.type,
               record.key, record.revision)
        return self._shared.line(key, record.value,
                                 lambda: self._render(event.type, record, with_columns))

    def _render(self, kind: str, record: interface.Record, with_columns: bool) -> bytes:
        view = self.target.view
        if view is negotiation.View.OBJECT:
            return self._line(kind, codec.raw(record))
        obj = codec.decode(record)
        if view is negotiation.View.TABLE:
            rendered = table.render(
                self.info, [obj], api_version=self.target.api_version, include=self.include,
                list_meta={"resourceVersion": obj["metadata"]["resourceVersion"]},
                with_columns=with_columns)
            return self._line(kind, orjson.dumps(rendered))
        return self._line(kind, orjson.dumps(table.partial(obj, self.target.api_version)))


class _Mark(enum.Enum):
    """Queue entries that are not events."""

    END = "end"
    TICK = "tick"
    DEADLINE = "deadline"


_Item = events.WatchEvent | _Mark


async def _pump(source: AsyncIterator[events.WatchEvent], queue: asyncio.Queue[_Item],
                max_backlog: int) -> None:
    """Move events into the watcher's queue; ends the watch (410) if the client falls far
    behind, so a stalled reader holds a bounded backlog."""
    try:
        async for event in source:
            if queue.qsize() >= max_backlog:
                gone = errors.Gone("the watch fell too far behind; list again and re-watch")
                queue.put_nowait(events.WatchEvent("ERROR", status=gone.body()))
                return
            queue.put_nowait(event)
    finally:
        queue.put_nowait(_Mark.END)  # the queue is unbounded, so this never waits


async def lines(source: AsyncIterator[events.WatchEvent], encoder: Encoder, *,
                timeout: float | None, bookmarks: bool, start: int = 0,
                tuning: Tuning = DEFAULT) -> AsyncIterator[bytes]:
    """Encoded events until ``timeout`` elapses, an ERROR is sent, or the events end.

    One pump task per watch reads the storage iterator into a queue; timers put the deadline
    and bookmark ticks into the same queue, so waiting costs nothing per event.
    """
    loop = asyncio.get_running_loop()
    if timeout is None:
        timeout = tuning.default_timeout * (1 + random.random())
    queue: asyncio.Queue[_Item] = asyncio.Queue()
    deadline = loop.call_later(timeout, queue.put_nowait, _Mark.DEADLINE)
    interval = tuning.bookmark_interval
    tick = loop.call_later(interval, queue.put_nowait, _Mark.TICK) if bookmarks else None
    last = start
    pump = asyncio.create_task(_pump(source, queue, tuning.max_backlog))
    try:
        while True:
            item = await queue.get()
            if isinstance(item, events.WatchEvent):
                last = max(last, item.revision)
                if item.type == "PROGRESS":
                    continue  # only moves the next bookmark's resourceVersion on
                yield encoder.encode(item)
                if item.type == "ERROR":
                    return
            elif item is _Mark.TICK:
                if last:
                    yield encoder.bookmark(last)
                tick = loop.call_later(interval, queue.put_nowait, _Mark.TICK)
            elif item is _Mark.END:
                failure = pump.exception() if pump.done() and not pump.cancelled() else None
                if failure is not None:
                    raise failure
                return
            else:  # the deadline
                return
    finally:
        deadline.cancel()
        if tick is not None:
            tick.cancel()
        pump.cancel()
        with contextlib.suppress(BaseException):
            await pump


async def live_lines(source: AsyncIterator[events.WatchEvent], encoder: Encoder, *,
                     timeout: float | None, tuning: Tuning = DEFAULT) -> AsyncIterator[bytes]:
    """``lines`` without bookmarks, reading the source in the response's own task.

    No pump task and no queue: one task step per event instead of two, which is most of what a
    watcher costs besides its write when many watch one change. The deadline applies only while
    waiting for the next event, so it never cuts a write. A client that stops reading holds this
    iterator back, and with it the storage watch, which later catches up from its log (or ends
    with a 410 once that history is compacted), so nothing piles up here.
    """
    loop = asyncio.get_running_loop()
    if timeout is None:
        timeout = tuning.default_timeout * (1 + random.random())
    deadline = loop.time() + timeout
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    event = await anext(source)
            except (TimeoutError, StopAsyncIteration):
                return
            yield encoder.encode(event)
            if event.type == "ERROR":
                return
    finally:
        close = getattr(source, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


def response(source: AsyncIterator[events.WatchEvent], encoder: Encoder,
             opts: options.WatchOptions, tuning: Tuning = DEFAULT) -> responses.StreamingResponse:
    start = int(opts.resource_version) if opts.resource_version.isdigit() else 0
    body: AsyncIterator[bytes]
    if opts.allow_bookmarks:
        body = lines(source, encoder, timeout=opts.timeout_seconds, bookmarks=True, start=start,
                     tuning=tuning)
    else:
        body = live_lines(source, encoder, timeout=opts.timeout_seconds, tuning=tuning)
    return responses.StreamingResponse(body, media_type="application/json",
                                       headers={"Cache-Control": "no-cache"})
