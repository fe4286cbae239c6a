"""A bind made with the new mount API: ``open_tree(OPEN_TREE_CLONE)`` of the source, then
``move_mount`` of that clone onto the target.

Against ``mount(MS_BIND)`` through ``/proc/self/fd/N`` this needs no descriptor of the target
itself and resolves no magic link: the clone is attached at ``(parent descriptor, name)``, and
``move_mount`` never follows a symlink there (a symlink or a file at the target fails EINVAL,
reported as ENOTDIR, the error the other way gives). The clone is a mount of its own, detached
until attached, and it carries the flags of the mount its source lies on: ``fstatvfs`` of the
clone's descriptor checks they are read-only, nosuid and nodev *before* the tree appears at the
target, so no target is ever writable, even for a moment. A clone that is closed unattached
disappears with its descriptor.

Linux has both calls since 5.2. Where they are missing or refused (ENOSYS; EPERM from a seccomp
profile that does not know them) ``Attacher.attach`` answers False from then on and the mounter
binds with ``mount(2)`` as before.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from collections.abc import Callable
from typing import cast

from nodeplugin.cache import kernel

SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
"""The same numbers on every architecture (Linux gave new calls one number in 5.x)."""
AT_FDCWD = -100
OPEN_TREE_CLONE = 0x1
MOVE_MOUNT_F_EMPTY_PATH = 0x4

Syscall = Callable[..., int]
"""``syscall(2)`` as ctypes calls it: the number, then the call's arguments; -1 sets errno."""


class Attacher:
    def __init__(self, *, enabled: bool = True, syscall: Syscall | None = None) -> None:
        self.available = enabled and sys.platform == "linux"
        """False once the kernel refused the calls (or when disabled): the mounter binds with
        ``mount(2)`` instead."""
        self._syscall = syscall or cast(Syscall, kernel.syscall())

    def attach(self, source: str, parent: int, name: str, sealed: int) -> bool:
        """Attach a clone of the tree at ``source`` on ``name`` in the directory ``parent``
        when the clone's mount has every flag of ``sealed`` (``statvfs`` flags); True when it
        was attached, False (nothing mounted) when the calls are unavailable or a flag is
        missing. Raises OSError for what the kernel refuses otherwise."""
        if not self.available:
            return False
        tree = int(self._syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(source),
                                 OPEN_TREE_CLONE | os.O_CLOEXEC))
        if tree < 0:
            err = ctypes.get_errno()
            if err in kernel.REFUSED:
                self.available = False
                return False
            raise OSError(err, f"clone {source}: {os.strerror(err)}")
        try:
            if os.fstatvfs(tree).f_flag & sealed != sealed:
                return False
            if self._syscall(SYS_MOVE_MOUNT, tree, b"", parent, os.fsencode(name),
                             MOVE_MOUNT_F_EMPTY_PATH) != 0:
                err = ctypes.get_errno()
                if err == errno.EINVAL and not _is_directory(parent, name):
                    err = errno.ENOTDIR  # a symlink or a file there: never followed
                raise OSError(err, f"attach {source}: {os.strerror(err)}")
            return True
        finally:
            os.close(tree)


def _is_directory(parent: int, name: str) -> bool:
    try:
        found = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode)
