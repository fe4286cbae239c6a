"""The C library's system-call entry points, for the calls Python's ``os`` lacks (``mount``,
``openat2``, ``open_tree``, ...), and the answer that means a call cannot be used here.

Each caller gets functions of its own (``ctypes`` keeps argument types per function object, so
one caller's ``argtypes`` never change another's), all setting ``errno`` for ``ctypes.get_errno``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno

REFUSED = (errno.ENOSYS, errno.EPERM)
"""A new call's errno when this kernel lacks it (ENOSYS) or a seccomp profile that does not know
it refuses it (EPERM): callers fall back to the older calls from then on."""


def libc() -> ctypes.CDLL:
    """A handle of the C library with ``errno`` kept for ``ctypes.get_errno``."""
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def syscall() -> ctypes._NamedFuncPointer:
    """``syscall(2)``, answering a C long (a descriptor, 0, or -1 with errno set)."""
    call = libc().syscall
    call.restype = ctypes.c_long
    return call
