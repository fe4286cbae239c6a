"""Mount targets under the kubelet directory, reached without following a single symlink.

kubelet creates every directory between its root and a volume's target and never a symlink, so
a symlink anywhere below the kubelet directory is somebody else's doing: followed, it would point
a bind mount over a directory outside (``.../mount -> /etc``), or an unmount at another Pod's
volume. So a target is opened from the kubelet directory one component at a time with
``O_NOFOLLOW`` (``RESOLVE_NO_SYMLINKS`` semantics, on every kernel, not only those with openat2),
and the mount calls address it through the opened parent, ``/proc/self/fd/<parent>/<name>``: a
component swapped for a symlink after the check is never followed either. The kubelet directory
itself may be a symlink (it is the operator's configuration); targets are reported under its real
path, which is what the mount table shows.

Opening blocks briefly (one ``openat2``, or a few ``openat``); callers on the event loop may run it
inline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import stat
import time
from collections.abc import Callable
from types import TracebackType

from nodeplugin import errors
from nodeplugin.cache import nofollow

_WALK = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SHOWN = 200
"""Characters of a path a message shows (kubelet's paths are far shorter; a hostile one is cut)."""
REAL_BASE_SECONDS = 1.0
"""How long the kubelet directory's resolved path is reused (resolving it walks every component
of it; a publish needs it three times)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """A target whose parent directory is open (``O_PATH``), valid inside ``Targets.open``."""

    path: str
    """The canonical path: the kubelet directory's real path plus the components below it."""
    parent: int
    name: str

    @property
    def at(self) -> str:
        """The target for path-based system calls: through the open parent, nothing re-resolved
        but ``name`` itself."""
        return f"/proc/self/fd/{self.parent}/{self.name}"

    def lstat(self) -> os.stat_result | None:
        """What is at the target now (a symlink is reported, not followed); None if nothing."""
        try:
            return os.stat(self.name, dir_fd=self.parent, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open_directory(self) -> int:
        """An ``O_PATH`` descriptor of the directory at the target (the top mount, if any);
        a symlink or a non-directory there fails with ENOTDIR."""
        return os.open(self.name, _WALK, dir_fd=self.parent)


class Opened:
    """``Targets.open``'s context manager (a class: every publish and unpublish enters one)."""

    __slots__ = ("_canonical", "_parent", "_rules")

    def __init__(self, rules: Targets, canonical: str) -> None:
        self._rules = rules
        self._canonical = canonical
        self._parent: int | None = None

    def __enter__(self) -> Target | None:
        rules, canonical = self._rules, self._canonical
        real_base = rules.real_base()
        norm = os.path.normpath(canonical)
        if not _strictly_under(norm, real_base):
            raise errors.PermissionDenied(
                f"target path {shown(canonical)} is not under the kubelet directory {rules.base}"
            )
        above, _, name = norm.rpartition("/")
        self._parent = rules._open_parent(canonical, real_base, above)
        if self._parent is None:
            return None
        return Target(canonical, self._parent, name)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._parent is not None:
            os.close(self._parent)
            self._parent = None


class Targets:
    """The rules for targets under one kubelet directory."""

    def __init__(
        self,
        kubelet_dir: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        opener: nofollow.Opener | None = None,
    ) -> None:
        self.base = os.path.normpath(kubelet_dir)
        self._clock = clock
        self._opener = opener or nofollow.Opener()
        self._real_base = ""
        self._resolved_at = -REAL_BASE_SECONDS

    def real_base(self) -> str:
        """The kubelet directory's real path, resolved again once ``REAL_BASE_SECONDS`` passed
        (an operator may repoint a symlinked kubelet directory; nothing below it is resolved)."""
        now = self._clock()
        if now - self._resolved_at >= REAL_BASE_SECONDS:
            self._real_base = os.path.realpath(self.base)
            self._resolved_at = now
        return self._real_base

    def canonical(self, target: str) -> str:
        """The canonical path of ``target``; PermissionDenied unless it lies strictly below the
        kubelet directory once normalized (``..`` is resolved lexically, never by the kernel)."""
        if not os.path.isabs(target):
            raise errors.PermissionDenied(f"target path {shown(target)} must be absolute")
        norm = os.path.normpath(target)
        if not _strictly_under(norm, self.base):
            raise errors.PermissionDenied(
                f"target path {shown(target)} is not under the kubelet directory {self.base}"
            )
        return os.path.join(self.real_base(), _below(norm, self.base))

    def open(self, canonical: str) -> Opened:
        """Open the parent of a canonical target without following symlinks below the kubelet
        directory, as a context manager: it gives the ``Target``, or None when a directory on the
        way does not exist, and closes the parent at its end.

        Raises PermissionDenied when a component is a symlink and FailedPrecondition when one is
        not a directory.
        """
        return Opened(self, canonical)

    def _open_parent(self, canonical: str, real_base: str, above: str) -> int | None:
        """An ``O_PATH`` descriptor of the directory ``above`` (the kubelet directory's real
        path or one below it), no symlink followed; None when it does not exist."""
        try:
            fd = self._opener.open(above or "/", _WALK)
        except FileNotFoundError:
            return None
        except OSError:
            fd = None  # a symlink or a non-directory on the way: the walk says which and where
        if fd is not None:
            return fd
        below = _below(above, real_base) if above != real_base else ""
        return _walk(canonical, real_base, below.split("/") if below else [])

    def check(self, target: str) -> str:
        """The canonical target, refused (PermissionDenied) when it or any directory on its way
        below the kubelet directory is a symlink, and (FailedPrecondition) when something other
        than a directory is there. A target or parent that does not exist yet passes."""
        canonical = self.canonical(target)
        with self.open(canonical) as opened:
            if opened is not None:
                refuse_unusable(opened)
        return canonical


def refuse_unusable(target: Target) -> os.stat_result | None:
    """What is at the target (None if nothing), unless it is a symlink or not a directory."""
    found = target.lstat()
    if found is None:
        return None
    if stat.S_ISLNK(found.st_mode):
        raise symlink_refusal(target.path)
    if not stat.S_ISDIR(found.st_mode):
        raise errors.FailedPrecondition(
            f"target path {shown(target.path)} exists and is not a directory"
        )
    return found


def symlink_refusal(path: str, via: str | None = None) -> errors.PermissionDenied:
    where = "is a symlink" if via is None else f"passes through the symlink {shown(via)}"
    return errors.PermissionDenied(
        f"target path {shown(path)} {where}; nothing below the kubelet directory may be a "
        "symlink (kubelet creates only directories there)"
    )


def shown(path: str) -> str:
    """A path for a message, cut when it is longer than any kubelet would send."""
    return repr(path if len(path) <= SHOWN else path[:SHOWN] + "...")


def _walk(canonical: str, real_base: str, parts: list[str]) -> int | None:
    """An ``O_PATH`` descriptor of the directory ``parts`` below the kubelet directory, opened
    one component at a time without following symlinks; None if one does not exist."""
    try:
        fd = os.open(real_base, _WALK & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    walked = real_base
    try:
        for part in parts:
            walked = os.path.join(walked, part)
            try:
                child = os.open(part, _WALK, dir_fd=fd)
            except FileNotFoundError:
                os.close(fd)
                return None
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                raise _refusal(canonical, walked, fd, part) from exc
            os.close(fd)
            fd = child
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


def _refusal(canonical: str, walked: str, parent: int, name: str) -> errors.PluginError:
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return symlink_refusal(canonical, via=walked)
    return errors.FailedPrecondition(
        f"target path {shown(canonical)} passes through {shown(walked)}, which is not a directory"
    )


def _below(path: str, base: str) -> str:
    """``path`` relative to ``base``, which it lies strictly below (both normalized)."""
    return path[len(base.rstrip("/")) + 1 :]


def _strictly_under(path: str, base: str) -> bool:
    """``path`` lies below ``base`` (both absolute and normalized)."""
    return path.startswith(base.rstrip("/") + "/") and path != base
