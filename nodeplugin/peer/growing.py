"""One file answer of a file this node is still fetching from a hub: its bytes as they arrive.

``GET /peer/v1/files/{algorithm}/{hex}`` with a ``Range: bytes=start-end`` (an explicit end: the
puller's manifest says the size, this node does not know it yet) for a file that is not stored
but that an attempt of this node claimed (``cache.inflight``, with the file it writes) answers 206
``Content-Range: bytes start-end/*`` at once and sends the range as the fetch writes it: the
fetch writes and hashes its bytes strictly in order, so the first ``received`` bytes of the file
are on disk, and the answer reads only below that mark, waiting (``POLL_SECONDS``) for it to
move. The file is opened once: when the fetch stores it (the same inode, linked into the store),
the rest is read to the end; when the fetch gives it up unstored, or nothing arrives for
``idle_seconds``, the answer ends short, and the puller takes the rest from its next source
from its last received byte.

Nothing here is checked: the bytes are what this node's hub sent so far, unverified. The puller
hashes the whole file against its own manifest and fetches it again from the hub on a mismatch,
which is what makes serving them early safe (``materialize/swarm.py``).
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import AsyncIterator

from starlette import responses

from nodeplugin import reviews
from nodeplugin.cache import files, inflight
from nodeplugin.peer import admission, sending, slots, wire

POLL_SECONDS = 0.05
"""How often a waiting answer looks again at the fetch's byte count."""


async def send(ident: files.Identity, fetching: inflight.Fetching, range_header: str | None, *,
               registry: inflight.InFlight, store: files.FileStore, caller: reviews.Identity,
               streams: slots.Slots, send_timeout: float, served: dict[str, int],
               what: str) -> responses.Response:
    """The answer for ``ident``, which ``fetching`` (a claim of this node) is writing."""
    wanted = _range(range_header)
    if wanted is None:
        return admission.status(416, "RequestedRangeNotSatisfiable",
                                "a file still being fetched is served by bytes=start-end only")
    start, end = wanted
    if fetching.path is None:
        return admission.status(404, "NotFound", "no stored file of that identity")
    path = fetching.path
    taken = await sending.opened(caller, streams, lambda: _open(path),
                                 "no stored file of that identity")
    if isinstance(taken, responses.Response):
        return taken
    _, fd = taken

    def available() -> int | None:
        """Bytes of the file that may be read now; None: the fetch ended without storing it."""
        now = registry.fetching(ident)
        if now is not None and now.path == fetching.path:
            return now.progress()
        try:
            stored = os.lstat(store.path(ident))
            mine = os.fstat(fd)
        except OSError:
            return None
        same = (stored.st_dev, stored.st_ino) == (mine.st_dev, mine.st_ino)
        return mine.st_size if same and stat.S_ISREG(stored.st_mode) else None

    async def body() -> AsyncIterator[bytes]:
        offset = start
        moved = time.monotonic()
        while offset <= end:
            have = available()
            if have is None:
                return
            if have <= offset:
                if time.monotonic() - moved > send_timeout:
                    return
                await asyncio.sleep(POLL_SECONDS)
                continue
            size = min(wire.CHUNK_BYTES, have - offset, end - offset + 1)
            chunk = await asyncio.to_thread(os.pread, fd, size, offset)
            if not chunk:
                return
            offset += len(chunk)
            moved = time.monotonic()
            served["bytes"] += len(chunk)
            yield chunk

    return sending.answer_with(body, taken, start, end, "*", send_timeout=send_timeout,
                               what=f"{what} (still fetching) for {caller.key}")


def _range(header: str | None) -> tuple[int, int] | None:
    if header is None or not header.strip().rpartition("-")[2]:
        return None
    try:
        return wire.byte_range(header, 1 << 62)
    except wire.RangeError:
        return None


def _open(path: os.PathLike[str]) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileNotFoundError("not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd
