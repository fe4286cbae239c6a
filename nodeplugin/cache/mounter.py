"""Read-only bind mounts through mount(2)/umount2(2) via ctypes.

Why the system calls and not ``mount(8)``: a warm mount is on kubelet's critical path (p99 budget
20 ms with 50 in parallel); two fork+exec of ``mount`` per publish cost several milliseconds each
and ``mount(8)`` also reads fstab/utab. A bind cannot be made read-only in the same call, but it
takes the flags of the mount its source is on: bound from the cache's read-only view
(``cache.view``), a target is read-only, nosuid and nodev from the moment it exists. There the
bind is a clone of the view's tree attached with the new mount API (``cache.attach``: its flags
checked on the clone before it is attached), or, without that API, one ``mount(2)`` whose flags a
``statvfs`` checks. Otherwise a remount of the bind with ``MS_RDONLY`` follows. Either way writes
fail with EROFS.

Targets arrive opened (``targets.Target``): a clone is attached at the open parent and the name,
which ``move_mount`` never follows; a ``mount(2)`` bind goes onto the directory descriptor opened
without following symlinks (``/proc/self/fd/N``, the kernel does not resolve a name again), the
remount onto the new mount's root reopened the same way and checked to be the source tree, and
the unmount through the open parent with ``UMOUNT_NOFOLLOW``, so a symlink at the target is
never followed to another place or another Pod's volume.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Protocol

from nodeplugin.cache import attach, kernel, targets

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MNT_DETACH = 0x2
UMOUNT_NOFOLLOW = 0x8
MAX_STACKED = 16


SEALED = os.ST_RDONLY | os.ST_NOSUID | os.ST_NODEV
"""The flags every published target's mount carries."""


class Mounter(Protocol):
    def bind_readonly(
        self, source: str, target: targets.Target, *, readonly_source: bool = False
    ) -> None:
        """Bind ``source`` on the directory at ``target`` read-only; on failure nothing stays
        mounted. A symlink or a non-directory at the target fails (ENOTDIR). With
        ``readonly_source`` the source lies on a read-only, nosuid, nodev mount, whose flags a
        bind takes: when the new mount has them, no remount is needed."""
        ...

    def unmount(self, target: targets.Target) -> bool:
        """Unmount the top mount at ``target`` (never through a symlink there): True if one was
        removed, False if none was."""
        ...

    def make_view(self, source: str, target: targets.Target) -> bool:
        """Mount ``source`` read-only, nosuid and nodev at ``target`` for binds to be made from
        (``cache.view``); False when this mounter makes no views."""
        ...


class LinuxMounter:
    def __init__(self, *, attacher: attach.Attacher | None = None) -> None:
        self._attacher = attacher or attach.Attacher()
        libc = kernel.libc()
        self._mount = libc.mount
        self._mount.argtypes = [
            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p
        ]
        self._mount.restype = ctypes.c_int
        self._umount2 = libc.umount2
        self._umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self._umount2.restype = ctypes.c_int

    def bind_readonly(
        self, source: str, target: targets.Target, *, readonly_source: bool = False
    ) -> None:
        if readonly_source and self._attacher.attach(source, target.parent, target.name, SEALED):
            return
        src = os.fsencode(source)
        below = target.open_directory()
        try:
            if self._mount(src, _fd_path(below), None, MS_BIND, None) != 0:
                _raise(f"bind {source} on {target.path}")
        finally:
            os.close(below)
        if readonly_source and _sealed(target):
            return
        self._seal(source, target)

    def _seal(self, source: str, target: targets.Target) -> None:
        """Remount the bind just made on ``target`` read-only, after checking it is the one;
        when the remount fails, that bind (and only it) is detached."""
        top = target.open_directory()
        try:
            mounted, expected = os.fstat(top), os.stat(source)
            if (mounted.st_dev, mounted.st_ino) != (expected.st_dev, expected.st_ino):
                # Something else is on top now; whatever it is, it is not ours to unmount.
                raise OSError(errno.EBUSY, f"{target.path} changed while it was being mounted")
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
            if self._mount(None, _fd_path(top), None, flags, None) != 0:
                err = ctypes.get_errno()
                self._umount2(_fd_path(top), MNT_DETACH)
                raise OSError(err, f"remount {target.path} read-only: {os.strerror(err)}")
        finally:
            os.close(top)

    def make_view(self, source: str, target: targets.Target) -> bool:
        self.bind_readonly(source, target)
        return True

    def unmount(self, target: targets.Target) -> bool:
        at = os.fsencode(target.at)
        if self._umount2(at, UMOUNT_NOFOLLOW) == 0:
            return True
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOENT, errno.ENOTDIR):
            return False  # not a mount point (a symlink, or no such path): nothing to unmount
        if err == errno.EBUSY:
            # Something still has the tree open; detach now, the kernel frees it when closed.
            if self._umount2(at, MNT_DETACH | UMOUNT_NOFOLLOW) == 0:
                return True
            err = ctypes.get_errno()
        raise OSError(err, f"unmount {target.path}: {os.strerror(err)}")


def _sealed(target: targets.Target) -> bool:
    """The mount now at ``target`` is read-only, nosuid and nodev."""
    try:
        return os.statvfs(target.at).f_flag & SEALED == SEALED
    except OSError:
        return False  # sealed the usual way, which checks what is there


def _fd_path(fd: int) -> bytes:
    return f"/proc/self/fd/{fd}".encode()


def _raise(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")
