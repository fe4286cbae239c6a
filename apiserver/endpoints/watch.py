"""Watch responses: JSON lines of events, periodic bookmarks, and the timeout that ends a stream.

Each watcher reads the one shared storage broadcast through its ResourceStore iterator; the work
per event here is a byte splice (plain JSON) or one decode (Table / PartialObjectMetadata).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette import responses

from apiserver import errors
from apiserver.endpoints import negotiation, table
from apiserver.registry import codec, events, options
from openapi import resources

# How often a watch asking for bookmarks gets one while nothing else happens.
BOOKMARK_INTERVAL = 60.0
# Like Go's minRequestTimeout (1800 s) times 1 + rand: streams without timeoutSeconds end in
# 30 to 60 minutes, spreading reconnects.
DEFAULT_TIMEOUT = 1800.0
# Events queued for a client that does not read; past this the watch ends with a 410.
MAX_BACKLOG = 10_000


class Encoder:
    """Turns registry watch events into the bytes of one line each, for one reply shape."""

    def __init__(self, info: resources.ResourceInfo, target: negotiation.Target,
                 include: str = "Metadata") -> None:
        self.info = info
        self.target = target
        self.include = include
        self._first_table = True

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
        if event.record is None:
            raise ValueError(f"a {event.type} watch event needs its record")
        view = self.target.view
        if view is negotiation.View.OBJECT:
            return self._line(event.type, codec.raw(event.record))
        obj = codec.decode(event.record)
        if view is negotiation.View.TABLE:
            rendered = table.render(
                self.info, [obj], api_version=self.target.api_version, include=self.include,
                list_meta={"resourceVersion": obj["metadata"]["resourceVersion"]},
                with_columns=self._first_table)
            self._first_table = False
            return self._line(event.type, orjson.dumps(rendered))
        return self._line(event.type, orjson.dumps(table.partial(obj, self.target.api_version)))


class _Mark(enum.Enum):
    """Queue entries that are not events."""

    END = "end"
    TICK = "tick"
    DEADLINE = "deadline"


_Item = events.WatchEvent | _Mark


async def _pump(source: AsyncIterator[events.WatchEvent], queue: asyncio.Queue[_Item]) -> None:
    """Move events into the watcher's queue; ends the watch (410) if the client falls far
    behind, so a stalled reader holds a bounded backlog."""
    try:
        async for event in source:
            if queue.qsize() >= MAX_BACKLOG:
                gone = errors.Gone("the watch fell too far behind; list again and re-watch")
                queue.put_nowait(events.WatchEvent("ERROR", status=gone.body()))
                return
            queue.put_nowait(event)
    finally:
        queue.put_nowait(_Mark.END)  # the queue is unbounded, so this never waits


async def lines(source: AsyncIterator[events.WatchEvent], encoder: Encoder, *,
                timeout: float | None, bookmarks: bool, start: int = 0) -> AsyncIterator[bytes]:
    """Encoded events until ``timeout`` elapses, an ERROR is sent, or the events end.

    One pump task per watch reads the storage iterator into a queue; timers put the deadline
    and bookmark ticks into the same queue, so waiting costs nothing per event.
    """
    loop = asyncio.get_running_loop()
    if timeout is None:
        timeout = DEFAULT_TIMEOUT * (1 + random.random())
    queue: asyncio.Queue[_Item] = asyncio.Queue()
    deadline = loop.call_later(timeout, queue.put_nowait, _Mark.DEADLINE)
    tick = loop.call_later(BOOKMARK_INTERVAL, queue.put_nowait, _Mark.TICK) if bookmarks else None
    last = start
    pump = asyncio.create_task(_pump(source, queue))
    try:
        while True:
            item = await queue.get()
            if isinstance(item, events.WatchEvent):
                last = max(last, item.revision)
                yield encoder.encode(item)
                if item.type == "ERROR":
                    return
            elif item is _Mark.TICK:
                if last:
                    yield encoder.bookmark(last)
                tick = loop.call_later(BOOKMARK_INTERVAL, queue.put_nowait, _Mark.TICK)
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


def response(source: AsyncIterator[events.WatchEvent], encoder: Encoder,
             opts: options.WatchOptions) -> responses.StreamingResponse:
    start = int(opts.resource_version) if opts.resource_version.isdigit() else 0
    body = lines(source, encoder, timeout=opts.timeout_seconds,
                 bookmarks=opts.allow_bookmarks, start=start)
    return responses.StreamingResponse(body, media_type="application/json",
                                       headers={"Cache-Control": "no-cache"})
