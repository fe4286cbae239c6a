"""Replace a file in one step that survives a crash whole or not at all.

``write_atomic`` writes the new content to a temporary file with a name no one else uses (so two
writers never share it, and nothing planted at a predictable name is followed or truncated),
fsyncs it, renames it over the target and fsyncs the directory, so the rename itself is on disk
before the call returns. Files end up 0600 unless the caller says otherwise: what the server and
the plugin write (credentials, keys, state) is for their owner only.

Everything here blocks; async callers run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
from collections.abc import Callable

PRIVATE = 0o600


def fsync_path(
    path: str | os.PathLike[str], *, fsync: Callable[[int], None] = os.fsync
) -> None:
    """fsync a regular file or a directory by path (a read-only open suffices on Linux)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int = PRIVATE,
    fsync: Callable[[int], None] = os.fsync,
) -> None:
    """Replace ``path`` with ``data``: unique temp file, fsync, rename, fsync the directory.

    The file gets exactly ``mode`` whatever the umask. ``fsync`` is the call that makes a file
    descriptor durable (tests pass a recorder).
    """
    target = pathlib.Path(path)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
    )
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    fsync_path(target.parent, fsync=fsync)
