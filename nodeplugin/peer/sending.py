"""One file answer of the peer port: a whole file or one byte range of it, under a stream slot.

Shared by the two ways a file is asked for (by its tree and path, ``server``; by its content
identity, ``stored``): the ``Range`` header is parsed against the file's size (416 when it
cannot be served), a stream slot is taken (``slots.Slots``, 429/503 with ``Retry-After`` when
none comes) before the file is opened (a missing file is 404), and the bytes are read in
``wire.CHUNK_BYTES`` pieces by a worker thread and sent under ``answer.Answer``'s send timeout;
the file descriptor and the slot are given back when the answer ends, however it ends.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable

from starlette import responses

from nodeplugin import reviews
from nodeplugin.peer import admission, answer, slots, wire


async def send(size: int, range_header: str | None, open_fd: Callable[[], int], *,
               caller: reviews.Identity, streams: slots.Slots, send_timeout: float,
               served: dict[str, int], what: str) -> responses.Response:
    """The answer for a file of ``size`` bytes that ``open_fd`` opens (blocking; an OSError is
    404, and so is a file that is no longer of that size)."""
    try:
        wanted = wire.byte_range(range_header, size)
    except wire.RangeError as exc:
        return admission.status(416, "RequestedRangeNotSatisfiable", str(exc))
    start, end = wanted if wanted is not None else (0, size - 1)
    taken = await opened(caller, streams, lambda: _open(open_fd, size), "no such file")
    if isinstance(taken, responses.Response):
        return taken
    _, fd = taken

    async def body() -> AsyncIterator[bytes]:
        offset = start
        while offset <= end:
            chunk = await asyncio.to_thread(
                os.pread, fd, min(wire.CHUNK_BYTES, end - offset + 1), offset)
            if not chunk:
                return
            offset += len(chunk)
            served["bytes"] += len(chunk)
            yield chunk

    return answer_with(body, taken, start, end, None if wanted is None else str(size),
                       send_timeout=send_timeout, what=f"{what} for {caller.key}")


def answer_with(body: Callable[[], AsyncIterator[bytes]], taken: tuple[slots.Slot, int],
                start: int, end: int, total: str | None, *, send_timeout: float,
                what: str) -> answer.Answer:
    """The answer sending ``body`` (bytes ``start`` to ``end`` of a file): 200 for the whole
    file when ``total`` is None, else 206 ``Content-Range: bytes start-end/total``; the file
    descriptor closed and the slot of ``taken`` given back when it ends, however it ends."""
    slot, fd = taken

    def ended() -> None:
        os.close(fd)
        slot.release()

    headers = {"content-type": "application/octet-stream",
               "content-length": str(end - start + 1), "accept-ranges": "bytes"}
    if total is not None:
        headers["content-range"] = f"bytes {start}-{end}/{total}"
    return answer.Answer(200 if total is None else 206, headers, body,
                         send_timeout=send_timeout, on_end=ended, what=what)


async def opened(caller: reviews.Identity, streams: slots.Slots, open_fd: Callable[[], int],
                 missing: str) -> tuple[slots.Slot, int] | responses.Response:
    """A stream slot, then the file ``open_fd`` opens (blocking; an OSError is 404 saying
    ``missing``); the answer that refuses when either fails (the slot given back)."""
    slot = await streams.take(caller.key)
    if isinstance(slot, slots.Busy):
        return admission.status(slot.code, slot.reason, slot.message,
                                headers={"retry-after": str(slot.retry_after)})
    try:
        fd = await asyncio.to_thread(open_fd)
    except OSError:
        slot.release()
        return admission.status(404, "NotFound", missing)
    except BaseException:
        slot.release()
        raise
    return slot, fd


def _open(open_fd: Callable[[], int], size: int) -> int:
    fd = open_fd()
    try:
        if os.fstat(fd).st_size != size:
            raise FileNotFoundError("the file changed")
    except BaseException:
        os.close(fd)
        raise
    return fd
