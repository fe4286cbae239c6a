"""The committed revision of one SQLite file, shared by every server process that writes it.

With ``--processes N`` on SQLite each process keeps the live records and the watch ring in its
own memory and learns of the others' commits by reading the log table. This counter is what
tells it there is something to read: eight bytes in a small file next to the database
(``store.db-rev``), mapped into every process. A writer raises it after its COMMIT is durable and
before it acknowledges any write of that commit, so a process that finds the counter above the
revision it has applied, and reads the log before answering, never answers with a state older
than a write some client saw acknowledged (by any process).

The counter only grows: ``publish`` takes the maximum under an ``flock``, since two processes
may finish their commits in one order and publish them in the other. Reads take no lock; an
aligned eight-byte copy out of a shared mapping is one load on the platforms this server runs
on, and a reader never trusts the value beyond "read the log once more" (the log says what was
committed), so even a torn read would cost a wasted read, never a wrong answer.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import pathlib
import struct
from collections.abc import Iterator

_FORMAT = struct.Struct("<Q")
_COMMITTED = 0
"""Offset of the newest committed revision."""
_COMPACTED = 8
"""Offset of the compaction mark (history at or below it is gone)."""
_SIZE = 4096
"""One page: the mapping is a whole page anyway."""


def path_for(database: pathlib.Path) -> pathlib.Path:
    """Where the counter of ``database`` lives (beside SQLite's own -wal and -shm)."""
    return database.with_name(database.name + "-rev")


class Counter:
    """The mapped counter of one database file; every method is cheap and non-blocking except
    ``publish`` and ``reset``, which take the file's lock for a few microseconds."""

    def __init__(self, path: pathlib.Path, *, mode: int = 0o600) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
        try:
            os.chmod(path, mode)
            if os.fstat(fd).st_size < _SIZE:
                os.ftruncate(fd, _SIZE)  # zeros: revision 0 until a process publishes one
            self._map = mmap.mmap(fd, _SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def read(self) -> int:
        """The newest revision any process has published as committed."""
        value: int = _FORMAT.unpack_from(self._map, _COMMITTED)[0]
        return value

    def compacted(self) -> int:
        """The newest compaction mark any process has published."""
        value: int = _FORMAT.unpack_from(self._map, _COMPACTED)[0]
        return value

    def publish(self, revision: int) -> None:
        """Raise the counter to ``revision`` (never lower it)."""
        self._raise(_COMMITTED, revision)

    def publish_compacted(self, mark: int) -> None:
        self._raise(_COMPACTED, mark)

    def reset(self, revision: int, compacted: int) -> None:
        """Set both values, also lower: only with SQLite's write lock held and these read from
        the file under it (a store opening a file restored from a backup must not wait for
        revisions that will never come)."""
        with self._locked():
            _FORMAT.pack_into(self._map, _COMMITTED, revision)
            _FORMAT.pack_into(self._map, _COMPACTED, compacted)

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def _raise(self, offset: int, value: int) -> None:
        with self._locked():
            if value > _FORMAT.unpack_from(self._map, offset)[0]:
                _FORMAT.pack_into(self._map, offset, value)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
