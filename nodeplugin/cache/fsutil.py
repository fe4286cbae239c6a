"""Small durable file-system steps: fsync a file or directory, write atomically, remove a tree.

Everything here blocks; async callers run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import shutil
import stat


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a regular file or a directory by path (read-only open suffices on Linux)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` in one step: temp file, fsync, rename, fsync the parent."""
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_path(path.parent)


def remove_tree(path: pathlib.Path) -> None:
    """Remove a directory tree even when it was made read-only (published trees are 0555/0444).

    Missing paths are fine. Symlinks are removed, never followed.
    """
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    # Directories need their write bit back before their entries can be unlinked.
    for dirpath, _dirnames, _filenames in os.walk(path, followlinks=False):
        with contextlib.suppress(FileNotFoundError):
            mode = os.lstat(dirpath).st_mode
            if stat.S_ISDIR(mode):
                os.chmod(dirpath, stat.S_IMODE(mode) | stat.S_IWUSR | stat.S_IXUSR)
    shutil.rmtree(path)
