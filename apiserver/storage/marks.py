"""The highest revision a store handed out, kept outside the store, so that a store that went back
never hands out a revision twice and its clients list again.

A store can go back under the server: an emptyDir store lost with its Pod, a backup or an older
copy of the volume restored, a disk that lied about an fsync, an etcd restored from a snapshot.
Its revision is then behind resourceVersions clients hold, it would hand those out again for
other writes, and a watch from one would stay silent until the store passes it and then show
only later writes (kube-apiserver answers so too, tests/data/kube-samples/
resource-version-too-large.json): the client's copy would keep objects the store no longer has.

``Guarded`` wraps the server's store and keeps its mark in every ``Mark`` it is given: a file
beside the store (``FileMark``, written durably) and, in a cluster, an annotation of the
controllers' Lease in kube-apiserver (``apiserver.cluster.revisionmark``), which outlives the
Pod and its volumes. The mark trails the revisions handed out (writes, lists, gets): raised
``DELAY`` after a revision passed it (one write of the mark for many), at once when ``GAP`` / 2
behind, and on a clean stop; no write is let through while ``GAP`` revisions would be
unrecorded. So every revision ever handed out is at most the mark + ``GAP``. At start:

- the store's revision >= the mark: it holds everything it handed out (a restart, ``kill -9``
  too: a write is acknowledged only once durable); nothing changes, watches resume;
- behind the mark: the store went back. It is fenced (``interface.Store.fence``) at the mark +
  ``GAP`` + 1: numbering continues above every revision it may have handed out, and every
  earlier one is compacted, so a list or watch from any of them answers 410 Expired and its
  client lists again (a list from such a version is answered from the current state). The log
  says so, the metrics count it (``fences``, ``fenced_at``), and ``on_fence`` is told (an Event
  in a cluster).

Not seen: a loss within the mark's lag (writes of the last ``DELAY`` before a power loss on a
disk that lied, the mark not raised past them yet). docs/operations.md has the whole story.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import functools
import logging
import os
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol

from apiserver.storage import interface
from durable import disk

log = logging.getLogger(__name__)

GAP = 10_000
"""Revisions that may be handed out beyond the recorded mark (see the module docstring)."""
DELAY = 1.0
"""Seconds from a revision passing the mark to the mark's write (writes in between share it)."""
WAIT = 10.0
"""How long a write waits for the mark to be recorded before it is refused (503-like)."""
STOP_WAIT = 5.0
"""How long a stop waits for the last mark to be recorded."""


class Mark(Protocol):
    where: str
    """What and where, for the log: ``file /data/store.db-mark``, ``Lease ns/name``."""

    async def read(self) -> int:
        """The recorded revision (0: none); ``StorageError`` when it cannot be read."""
        ...

    async def write(self, revision: int) -> None:
        """Record at least ``revision`` (a higher one recorded stays); ``StorageError`` when
        it could not be."""
        ...


class FileMark:
    """The mark in a small file (the revision in decimal), replaced durably
    (``durable.disk.write_atomic``); processes sharing it (``--processes``) raise it under a
    lock, never lower it."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.where = f"file {path}"

    async def read(self) -> int:
        return await asyncio.to_thread(self._read)

    async def write(self, revision: int) -> None:
        await asyncio.to_thread(self._write, revision)

    def _read(self) -> int:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise interface.StorageError(
                f"cannot read the revision mark {self.path}: {exc}") from exc
        try:
            value = int(text.strip())
        except ValueError:
            value = -1
        if value < 0:
            raise interface.StorageError(
                f"the revision mark {self.path} holds no revision; remove it only if the store "
                f"beside it was never older than its clients (docs/operations.md)")
        return value

    def _write(self, revision: int) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.with_name(self.path.name + ".lock"),
                         os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, disk.PRIVATE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if self._read() >= revision:
                    return
                disk.write_atomic(self.path, b"%d\n" % revision)
            finally:
                os.close(fd)
        except OSError as exc:
            raise interface.StorageError(
                f"cannot write the revision mark {self.path}: {exc}") from exc


@dataclasses.dataclass(frozen=True, slots=True)
class Fence:
    """A start that found the store behind its mark."""

    found: int
    """The store's revision at start."""
    mark: int
    where: str
    """The marks, named (``Mark.where``)."""
    continued: int
    """The store's revision after the fence: every earlier one answers 410."""

    def describe(self) -> str:
        return (f"the store was at revision {self.found}, behind the revision mark {self.mark} "
                f"({self.where}): it went back (emptied, or an older copy). Numbering continues "
                f"at {self.continued}; every earlier resourceVersion answers 410 Expired, so "
                f"clients list again")


OnFence = Callable[[Fence], Awaitable[None]]


class Guarded(interface.Store):
    """``inner`` with its revision mark kept in ``marks`` (see the module docstring)."""

    def __init__(self, inner: interface.Store, marks: Sequence[Mark], *, gap: int = GAP,
                 delay: float = DELAY, wait: float = WAIT,
                 on_fence: OnFence | None = None) -> None:
        self.inner = inner
        self.health_check = inner.health_check
        self.marks = list(marks)
        self._gap = gap
        self._delay = delay
        self._wait = wait
        self._on_fence = on_fence
        self.recorded = 0
        """What every mark holds at least."""
        self.fences = 0
        """Starts of this process that found the store behind its mark."""
        self.last_fence: Fence | None = None
        self._known = 0
        """The newest revision handed out (written, listed, read or watched) through here."""
        self._inflight = 0
        self._raising: asyncio.Task[None] | None = None
        self._due: asyncio.TimerHandle | None = None
        self._failure = ""

    @property
    def where(self) -> str:
        return ", ".join(mark.where for mark in self.marks)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        mark = max(await asyncio.gather(*(each.read() for each in self.marks)), default=0)
        await self.inner.start()
        try:
            current = await self.inner.current_revision()
            if current < mark:
                current = await self._fence(current, mark)
            self._known = current
            await self._record(current)
        except BaseException:
            await self.inner.close()
            raise

    async def _fence(self, current: int, mark: int) -> int:
        try:
            continued = await self.inner.fence(mark + self._gap + 1)
        except interface.StorageError as exc:
            raise interface.StorageError(
                f"the store is at revision {current}, behind the revision mark {mark} "
                f"({self.where}), and cannot continue above it: {exc}; a store that is new on "
                f"purpose (another backend: nothing migrates) may instead start without the "
                f"mark (docs/operations.md, \"When the store goes back\")") from exc
        fence = Fence(found=current, mark=mark, where=self.where, continued=continued)
        log.warning("%s", fence.describe())
        self.fences += 1
        self.last_fence = fence
        if self._on_fence is not None:
            try:
                await self._on_fence(fence)
            except Exception:
                log.exception("telling of the fence failed")
        return continued

    async def flush(self) -> None:
        """Record the newest revision handed out now (a stop: the next start then finds the
        store exactly at its mark). Bounded by ``STOP_WAIT``; a failure is logged."""
        if self._due is not None:
            self._due.cancel()
            self._due = None
        if self.marks and self._known > self.recorded:
            try:
                await asyncio.wait_for(self._record(self._known), STOP_WAIT)
            except (TimeoutError, interface.StorageError) as exc:
                log.warning("the last revision mark (%d) was not recorded: %s", self._known,
                            exc or "no answer in time")

    async def close(self) -> None:
        await self.flush()
        if self._raising is not None:
            self._raising.cancel()
            await asyncio.gather(self._raising, return_exceptions=True)
        await self.inner.close()

    # -- the mark ----------------------------------------------------------------------------

    async def _record(self, revision: int) -> None:
        await asyncio.gather(*(each.write(revision) for each in self.marks))
        self.recorded = max(self.recorded, revision)

    def _seen(self, revision: int) -> None:
        """``revision`` was handed out: the mark follows (soon, or at once when far behind)."""
        if revision <= self._known:
            return
        self._known = revision
        if not self.marks or self._raising is not None:
            return
        if self._known - self.recorded >= self._gap // 2:
            self._raise()
        elif self._due is None:
            self._due = asyncio.get_running_loop().call_later(self._delay, self._raise)

    def _raise(self) -> asyncio.Task[None]:
        if self._due is not None:
            self._due.cancel()
            self._due = None
        if self._raising is None:
            self._raising = asyncio.create_task(self._raise_once(), name="revision mark")
        return self._raising

    async def _raise_once(self) -> None:
        target = self._known
        try:
            await self._record(target)
            self._failure = ""
        except interface.StorageError as exc:
            if str(exc) != self._failure:
                log.warning("the revision mark (%s) could not be raised to %d: %s", self.where,
                            target, exc)
            self._failure = str(exc)
        finally:
            self._raising = None
        if self._known > self.recorded and self._due is None:
            self._due = asyncio.get_running_loop().call_later(self._delay, self._raise)

    async def _admit(self) -> None:
        """Before a write: at most ``gap`` revisions beyond what the marks hold."""
        if not self.marks:
            return
        if self._known + self._inflight + 1 > self.recorded + self._gap:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._raise()), self._wait)
            if self._known + self._inflight + 1 > self.recorded + self._gap:
                raise interface.Unavailable(
                    f"the revision mark ({self.where}) cannot be recorded: "
                    f"{self._failure or 'no answer in time'}")

    async def _write(self, write: Callable[[], Awaitable[interface.Record]]) -> interface.Record:
        await self._admit()
        self._inflight += 1
        try:
            record = await write()
        finally:
            self._inflight -= 1
        self._seen(record.revision)
        return record

    # -- the store, through ------------------------------------------------------------------

    async def check(self) -> None:
        await self.inner.check()

    async def current_revision(self) -> int:
        revision = await self.inner.current_revision()
        self._seen(revision)
        return revision

    async def oldest_revision(self) -> int:
        return await self.inner.oldest_revision()

    async def get(self, key: str) -> interface.Record | None:
        record = await self.inner.get(key)
        if record is not None:
            self._seen(record.revision)
        return record

    async def list(self, prefix: str, *, revision: int = 0, start_after: str = "",
                   limit: int = 0) -> interface.Page:
        page = await self.inner.list(prefix, revision=revision, start_after=start_after,
                                     limit=limit)  # fmt: skip
        self._seen(page.revision)
        return page

    async def list_recent(self, prefix: str, *, not_older_than: int = 0, limit: int = 0,
                          wait: float = 0.0) -> interface.Page:
        page = await self.inner.list_recent(prefix, not_older_than=not_older_than, limit=limit,
                                            wait=wait)  # fmt: skip
        self._seen(page.revision)
        return page

    async def create(self, key: str, value: bytes) -> interface.Record:
        return await self._write(functools.partial(self.inner.create, key, value))

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> interface.Record:
        return await self._write(functools.partial(
            self.inner.update, key, value, expected_revision=expected_revision))

    async def delete(self, key: str, *, expected_revision: int) -> interface.Record:
        return await self._write(functools.partial(
            self.inner.delete, key, expected_revision=expected_revision))

    def watch(self, prefix: str, *, after: int) -> AsyncIterator[interface.Event]:
        # Not followed event by event (a thousand watchers would pay for it): every revision a
        # watch delivers was written through a Guarded (this one, or another replica's or
        # worker's recording to the same marks), except etcd's own keys (the compactor's, a
        # fence's), which GAP covers; lists and gets hand out the store's revision and are.
        return self.inner.watch(prefix, after=after)

    def updates(self, prefix: str, *,
                after: int) -> AsyncIterator[interface.Event | interface.Progress]:
        return self.inner.updates(prefix, after=after)

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def fence(self, revision: int) -> int:
        reached = await self.inner.fence(revision)
        self._seen(reached)
        return reached
