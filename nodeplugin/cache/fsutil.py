"""Removing a cache tree, read-only or not (durable writes live in the shared ``durable``).

Everything here blocks; async callers run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import stat


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
