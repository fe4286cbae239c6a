"""openat2(2) with ``RESOLVE_NO_SYMLINKS``: a path opened in one system call, no symlink followed
in any of its components.

``targets`` reaches every mount target this way: one call instead of opening each of the seven
directories below the kubelet directory in turn (and closing six). Linux has it since 5.6. Where
the call is missing or refused (ENOSYS on an older kernel, EPERM from a seccomp profile that does
not know it) ``Opener.open`` answers None from then on, and ``targets`` walks the path one
component at a time with ``O_NOFOLLOW``, which gives the same guarantee in more calls.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import Any, cast

from nodeplugin.cache import kernel

SYS_OPENAT2 = 437
"""openat2's number: the same on every architecture (Linux gave new calls one number in 5.x)."""
AT_FDCWD = -100
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


Syscall = Callable[[int, int, bytes, Any, int], int]
"""``syscall(2)`` as ctypes calls it: number, then openat2's four arguments; -1 sets errno."""


def _libc_syscall() -> Syscall:
    call = kernel.syscall()
    call.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
                     ctypes.c_size_t]
    return cast(Syscall, call)


class Opener:
    def __init__(self, *, enabled: bool = True, syscall: Syscall | None = None) -> None:
        self.available = enabled and sys.platform == "linux"
        """False once the kernel refused the call (or when disabled): callers walk instead."""
        self._syscall = syscall or _libc_syscall()
        self._how: dict[int, _OpenHow] = {}

    def open(self, path: str, flags: int) -> int | None:
        """A descriptor of ``path`` opened with ``flags`` (``O_CREAT`` is not supported), or
        None when openat2 cannot be used here. A symlink in any component fails ELOOP; every
        other failure is the kernel's OSError."""
        if not self.available:
            return None
        how = self._how.get(flags)
        if how is None:
            how = self._how[flags] = _OpenHow(flags, 0, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
        fd = self._syscall(SYS_OPENAT2, AT_FDCWD, os.fsencode(path), ctypes.byref(how),
                           ctypes.sizeof(how))
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err in kernel.REFUSED:
            self.available = False
            return None
        raise OSError(err, os.strerror(err), path)
