"""The cache's read-only view: ``<root>/view``, a bind of ``objects/sha256`` remounted read-only,
nosuid and nodev while the plugin runs.

Publishing binds a tree from the view, and a bind takes the flags of the mount its source is on,
so each target is read-only from the moment it is mounted, with no remount after it (a clone of
the view's tree attached, ``cache.attach``, or one mount(2); ``mounter``). Where the view cannot
be made, publishing binds from ``objects/`` and remounts, as it would without it.

The view is no reference (its source is the objects directory, not a tree: ``refs.scan`` skips
it), and binds made from it are mounts of their own: unmounting the view when the plugin stops, or
replacing what an earlier run left there when it starts, leaves every target mounted.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from nodeplugin.cache import layout, mounter, targets

log = logging.getLogger(__name__)
NAME = "view"


class View:
    def __init__(self, cache: layout.Layout, mount: mounter.Mounter) -> None:
        self._cache = cache
        self._mounter = mount
        self.path = str(cache.root / NAME)
        self.ready = False
        """True while the view is mounted read-only (``source`` answers)."""

    def open(self) -> bool:
        """Mount the view (replacing whatever is mounted there); False when it cannot be made."""
        try:
            os.makedirs(self.path, mode=0o755, exist_ok=True)
            with self._opened() as target:
                self._unmount_all(target)
                self.ready = self._mounter.make_view(str(self._cache.objects), target)
        except OSError as exc:
            log.warning("no read-only view of the cache at %s (%s): each mount is bound, then "
                        "remounted read-only", self.path, exc)
            self.ready = False
        return self.ready

    def source(self, digest: str) -> str | None:
        """Where ``digest``'s tree is seen read-only; None without the view."""
        if not self.ready:
            return None
        return os.path.join(self.path, layout.hex_of(digest))

    def lost(self) -> bool:
        """After a bind from the view found nothing: True (and the view is given up) when it is
        no longer mounted; False when it is, so what is missing is the tree itself."""
        try:
            here, tree = os.stat(self.path), os.stat(self._cache.objects)
            if (here.st_dev, here.st_ino) == (tree.st_dev, tree.st_ino):
                return False  # still the objects directory's bind
        except OSError:
            pass
        log.warning("the cache's read-only view at %s is no longer mounted; each mount is now "
                    "bound, then remounted read-only", self.path)
        self.ready = False
        return True

    def close(self) -> None:
        """Unmount the view (targets bound from it stay mounted)."""
        if not self.ready:
            return
        self.ready = False
        try:
            with self._opened() as target:
                self._unmount_all(target)
        except OSError as exc:
            log.warning("cannot unmount the cache's view at %s: %s", self.path, exc)

    @contextlib.contextmanager
    def _opened(self) -> Iterator[targets.Target]:
        """The view's directory as a ``targets.Target``: its parent (the cache root) opened."""
        above, _, name = self.path.rpartition("/")
        parent = os.open(above or "/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield targets.Target(self.path, parent, name)
        finally:
            os.close(parent)

    def _unmount_all(self, target: targets.Target) -> None:
        for _ in range(mounter.MAX_STACKED):
            if not self._mounter.unmount(target):
                return

