"""Wake-ups between the server processes sharing one SQLite file (``--processes N``).

Each process makes a FIFO in a directory next to the database (``store.db-wake/``) and reads
it on its event loop; after a commit a writer writes one byte into every other process's FIFO,
so their watchers hear of the commit at once instead of polling for it. A FIFO whose process is
gone has no reader, which ``open(O_NONBLOCK)`` reports (ENXIO): the writer removes it. A full
FIFO means its reader has wake-ups pending already, so nothing is lost by skipping it. The
wake-up only says "look at the counter" (``counter.Counter``); what was committed is read from
the log, so a lost or extra byte costs at most a delay or a look, never a wrong answer.

FIFOs rather than unix sockets: a socket's path must fit in 108 bytes, a data directory need not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import uuid


def path_for(database: pathlib.Path) -> pathlib.Path:
    return database.with_name(database.name + "-wake")


class Wakeups:
    """This process's FIFO in ``directory`` (made 0700) and the writing side to the others'."""

    def __init__(self, directory: pathlib.Path) -> None:
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
        self._directory = directory
        self._name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._path = directory / self._name
        os.mkfifo(self._path, 0o600)
        self._read = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        # Our own writing end keeps the FIFO open, so the reading end never sees end-of-file
        # (which would make it readable forever) when no peer has it open.
        self._keep = os.open(self._path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    def fileno(self) -> int:
        """Readable when another process has committed since the last ``drain``."""
        return self._read

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 4096):
                pass

    def notify(self) -> None:
        """Wake every other process on the file (from the writer thread, after a commit)."""
        try:
            names = os.listdir(self._directory)
        except OSError:
            return
        for name in names:
            if name == self._name:
                continue
            path = self._directory / name
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no reader: its process is gone
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                continue
            try:
                os.write(fd, b"!")
            except OSError:
                pass  # full (it has wake-ups pending) or gone: nothing to add
            finally:
                os.close(fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._path)
        for fd in (self._read, self._keep):
            with contextlib.suppress(OSError):
                os.close(fd)
