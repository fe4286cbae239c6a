"""One file of an attempt: resume point, in-order hashing and writing, checkpoints, verification.

The file's parts are fetched concurrently by the attempt's workers; this module's consumer takes
their bytes strictly in file order, writes them at their offset and feeds the hasher in the same
worker-thread call, so nothing is ever read back from disk. Every ``checkpoint_bytes`` it fsyncs
the file and records the offset and hash state in the attempt's ledger. At the end the size and
digest must match the manifest entry, or the file is discarded; a file that matches is made
0444 and stored in the node's file store at once (``cache.files``), before its tree publishes.

A file the store holds already is never fetched: ``prepare`` links the stored copy into the
staging directory instead. A file the staging directory shares with another name (a stored
copy) is never opened for writing: ``prepare`` takes it as complete when it is the stored copy,
and starts it again from zero otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pathlib
from collections.abc import Callable

from nodeplugin import errors
from nodeplugin.cache import files
from nodeplugin.materialize import checkpoint, hashing, interface, limits, pagecache, ranges
from openapi import manifest

BATCH_BYTES = 2 << 20
"""The most one write+hash hop takes; also the step at which a checkpoint can start."""
MIN_BATCH_BYTES = 1 << 20
WRITTEN_POINTS_SECONDS = 0.0
"""The least time between two background ledger writes (``LedgerWriter.flush_soon``). 0: back
to back, one at a time (each write covers every change made while the previous one ran); at
10 ms a restart re-fetched measurably more at 400-700 MB/s."""
MAX_CHUNKS = 512
"""Below the kernel's IOV_MAX (1024) for one pwritev."""


class IntegrityError(errors.Shown):
    """A file's size or hash differs from its manifest entry."""

    def __init__(self, message: str, check: interface.Check = interface.Check.HASH, *,
                 path: str = "") -> None:
        super().__init__(message)
        self.check = check
        self.path = path
        """The manifest path of the file that failed (empty when not one file's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Tuning:
    part_bytes: int = 4 << 20
    """One range request. Smaller parts spread a file over more connections for the same
    look-ahead memory; each costs a request (and, for LFS files, a redirect)."""
    checkpoint_bytes: int = 2 << 20
    """Bytes of a file between checkpoints (fsync + ledger entry). One checkpoint per file runs
    at a time, so on a busy disk they follow each other as fast as fsync allows instead: what a
    crash re-fetches per file being written, beside the look-ahead, is this plus what was written
    during one checkpoint (measured: 1-3 MiB)."""


class LedgerWriter:
    """Serializes ledger flushes of one attempt (snapshots written in order, off the loop).

    Flushes coalesce: a caller whose change was already written by a flush that started after it
    returns at once, so checkpoints of several files cost one write.
    """

    def __init__(self, ledger: checkpoint.Ledger) -> None:
        self.ledger = ledger
        self._lock = asyncio.Lock()
        self._written = -1
        self._background: asyncio.Task[None] | None = None
        self._again = False

    def flush_soon(self) -> None:
        """Write the ledger in the background (one flush at a time; changes made while one runs
        are written by the next)."""
        if self._background is not None and not self._background.done():
            self._again = True
            return
        if self._background is not None:
            self._background.result()  # a failed background flush fails the attempt here
        self._background = asyncio.create_task(self._flush_while_changed())

    async def _flush_while_changed(self) -> None:
        while True:
            self._again = False
            await self.flush()
            if not self._again:
                return
            # Written points of many batches go in one write (each costs a file creation and a
            # rename, and the encoding on the loop); what a crash of the plugin loses grows by
            # at most this long's worth of writing.
            await asyncio.sleep(WRITTEN_POINTS_SECONDS)

    async def settle(self) -> None:
        """Wait for the background flush (raising its error), e.g. before publication."""
        task, self._background = self._background, None
        if task is not None:
            await task

    async def flush(self) -> None:
        wanted = self.ledger.version
        async with self._lock:
            if self._written >= wanted:
                return
            version = self.ledger.version
            data = self.ledger.encode()
            await asyncio.to_thread(self.ledger.write, data)
            self._written = version


class FileTransfer:
    """Receives one manifest entry into ``root/<entry.path>``."""

    def __init__(
        self,
        entry: manifest.Entry,
        root: pathlib.Path,
        writer: LedgerWriter,
        budget: limits.Budget,
        tuning: Tuning,
        on_bytes: Callable[[int], None],
        recycle: Callable[[list[ranges.Chunk]], None] = lambda batch: None,
        *,
        store: files.FileStore,
        leader: FileTransfer | None = None,
    ) -> None:
        """``leader``: another file of the manifest with the same content, fetched for both;
        this one is linked from the store once the leader stored it (``follow``)."""
        self.entry = entry
        self._recycle = recycle
        self._store = store
        self.leader = leader
        self.stored = False
        """The file in the staging directory is the store's copy (taken from it, or stored)."""
        self.path = root / entry.path
        self._writer = writer
        self._budget = budget
        self._tuning = tuning
        self.on_bytes = on_bytes
        """Told the size of every batch written (the attempt's counter)."""
        self.parts: list[ranges.Part] = []
        self.frontier = 0
        """Index of the part being hashed now; that part never books budget."""
        self.offset = 0
        self.complete = False
        self._hasher: hashing.Hasher | None = None
        self._checkpointing: asyncio.Task[None] | None = None
        self._discarded = False
        self._dropped = 0
        """Bytes from here on may still be in the page cache (``pagecache.drop``)."""

    # --- before the download -------------------------------------------------------------------
    def prepare(self) -> int:
        """Take the file from the store, or find its resume point (blocking: stats, links and
        truncates); returns the bytes already held."""
        entry = self.entry
        if self._store.claim(entry, self.path):
            return self._taken()
        if self.leader is not None:
            return 0  # fetched by its leader, then linked (``follow``)
        saved = self._writer.ledger.resume_point(entry.path)
        try:
            info = os.lstat(self.path)
            size_on_disk = info.st_size
            if info.st_nlink > 1:
                # Another name links these bytes (a copy that left the store): never written.
                os.unlink(self.path)
                size_on_disk = -1
        except FileNotFoundError:
            size_on_disk = -1
        if saved is not None and saved.verified and size_on_disk == entry.size:
            self._store.put(self.path, entry)  # verified before a crash took its store link
            self.stored = entry.size > 0
            self.complete = True
            self.offset = entry.size
            return entry.size
        hasher: hashing.Hasher | None = None
        offset = 0
        if saved is not None and saved.state is not None and 0 < saved.offset <= size_on_disk:
            with contextlib.suppress(hashing.HashStateError):
                hasher = hashing.Hasher.restore(entry.algorithm, saved.state)
                offset = saved.offset
        if hasher is None:
            hasher = hashing.Hasher.for_entry(entry)
            self._writer.ledger.discard(entry.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, offset)
        finally:
            os.close(fd)
        self._hasher = hasher
        self.offset = offset
        self._dropped = offset
        self.parts = ranges.plan(entry.size, offset, self._tuning.part_bytes)
        return offset

    def _taken(self) -> int:
        self.complete = self.stored = True
        self.offset = self.entry.size
        self._writer.ledger.put(self.entry.path,
                                checkpoint.FileCheckpoint(self.entry.size, None, True))
        return self.entry.size

    def follow(self) -> None:
        """Link the copy the leader stored (blocking); raises when there is none."""
        if not self._store.claim(self.entry, self.path):
            raise IntegrityError(f"{self.entry.path}: the file it shares its content with was "
                                 "not stored", interface.Check.SIZE)
        self._taken()

    def in_one_part(self) -> None:
        """Fetch what is left in one range (a source that sends the file as it arrives itself:
        one stream in order, not parts waiting side by side). Before the fetch starts."""
        self.parts = ranges.plan(self.entry.size, self.offset, self.entry.size)

    def is_frontier(self, part: ranges.Part) -> bool:
        return self.frontier == part.index

    # --- the consumer ----------------------------------------------------------------------------
    async def consume(self) -> None:
        """Hash and write every part in order, checkpointing; then verify. Raises on mismatch."""
        if self.complete:
            return
        assert self._hasher is not None
        if self.parts:
            # Open only once bytes arrive: thousands of small files must not hold thousands of fds.
            await self.parts[0].wait(MIN_BATCH_BYTES)
        fd = await asyncio.to_thread(os.open, self.path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            last_checkpoint = self.offset
            for part in self.parts:
                self.frontier = part.index
                self._budget.wake()
                while True:
                    # Wake for a worthwhile batch, not every network read: each wake-up costs a
                    # thread hop.
                    await part.wait(MIN_BATCH_BYTES)
                    if part.error is not None:
                        raise part.error
                    batch = part.take(BATCH_BYTES, MAX_CHUNKS)
                    if batch:
                        size = sum(len(c) for c in batch)
                        await asyncio.to_thread(
                            _write_and_hash, fd, self.offset, batch, self._hasher
                        )
                        self._recycle(batch)
                        self.offset += size
                        state = self._hasher.save()
                        if state is not None and self.offset < self.entry.size:
                            self._writer.ledger.note_written(self.entry.path, self.offset, state)
                            self._writer.flush_soon()
                        given_back = min(size, part.booked)
                        part.booked -= given_back
                        self._budget.release(given_back)
                        self.on_bytes(size)
                        if (self.offset - last_checkpoint >= self._tuning.checkpoint_bytes
                                and self._checkpoint_idle()):
                            self._start_checkpoint(fd)
                            last_checkpoint = self.offset
                    elif part.done:
                        break
            await self._finish(fd)
        finally:
            await self._settle_checkpoint()
            await asyncio.to_thread(os.close, fd)

    def _checkpoint_idle(self) -> bool:
        """No checkpoint in flight (a finished one's failure is raised here)."""
        task = self._checkpointing
        if task is None:
            return True
        if not task.done():
            return False
        self._checkpointing = None
        task.result()
        return True

    def _start_checkpoint(self, fd: int) -> None:
        """Record offset and hash state once the bytes up to here are synced, in the background.

        The fsync runs while the consumer keeps writing past this offset (syncing more is fine);
        only then does the ledger claim the offset. ``fd`` stays open until the checkpoint is
        settled (``consume`` closes it after ``_settle_checkpoint``).
        """
        assert self._hasher is not None
        state = self._hasher.save()
        if state is None:
            return
        self._checkpointing = asyncio.create_task(self._checkpoint(fd, self.offset, state))

    async def _checkpoint(self, fd: int, offset: int, state: bytes) -> None:
        await asyncio.to_thread(_sync_and_drop, fd, self._dropped, offset)
        self._dropped = max(self._dropped, offset)
        if not self.complete and not self._discarded:
            self._writer.ledger.put(self.entry.path, checkpoint.FileCheckpoint(offset, state))
            await self._writer.flush()

    async def _settle_checkpoint(self) -> None:
        task, self._checkpointing = self._checkpointing, None
        if task is not None:
            with contextlib.suppress(FileNotFoundError):
                await task

    async def _finish(self, fd: int) -> None:
        assert self._hasher is not None
        await self._settle_checkpoint()
        entry = self.entry
        got = self._hasher.hexdigest()
        if self.offset != entry.size or got != entry.hexdigest:
            await self.discard()
            what = "size" if self.offset != entry.size else entry.algorithm
            raise IntegrityError(f"{entry.path}: {what} does not match the manifest",
                                 interface.Check.SIZE if what == "size" else interface.Check.HASH,
                                 path=entry.path)
        await asyncio.to_thread(_sync_and_drop, fd, self._dropped, entry.size)
        self._dropped = entry.size
        await asyncio.to_thread(self._store.put, self.path, entry)
        self.stored = entry.size > 0
        self._writer.ledger.put(entry.path, checkpoint.FileCheckpoint(entry.size, None, True))
        self.complete = True

    async def discard(self) -> None:
        """Remove the file and its ledger entry (its bytes can no longer be trusted)."""
        self._discarded = True
        await self._settle_checkpoint()
        self._writer.ledger.discard(self.entry.path)
        await self._writer.flush()
        with contextlib.suppress(FileNotFoundError):
            await asyncio.to_thread(os.unlink, self.path)


def _write_and_hash(
    fd: int, offset: int, batch: list[ranges.Chunk], hasher: hashing.Hasher
) -> None:
    """Write the batch at ``offset`` and hash it, in one thread hop (blocking)."""
    written = os.pwritev(fd, batch, offset)
    total = sum(len(c) for c in batch)
    if written < total:
        data = b"".join(batch)
        while written < total:
            written += os.pwrite(fd, data[written:], offset + written)
    pagecache.start_writeback(fd, offset, total)
    for chunk in batch:
        hasher.update(chunk)


def _sync_and_drop(fd: int, start: int, end: int) -> None:
    """fsync the file, then drop the pages of ``[start, end)``, durable now (blocking)."""
    os.fsync(fd)
    pagecache.drop(fd, start, end - start)
