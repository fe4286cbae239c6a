"""Publish and unpublish targets: record the reference, bind the published tree read-only.

``publish`` holds the digest's lock shared from the check that the tree is published until the
bind is done, so collection (which takes it exclusive) can never remove a tree in between; it
records the reference before binding and refuses the mount when the record cannot be written.
``unpublish`` works from the target path alone and succeeds for targets it never mounted.
Both reach the target through ``targets`` (no symlink below the kubelet directory is followed):
a symlink at or on the way to a target is refused, never mounted over and never unmounted
through.

Both run their system calls on the event loop, without a thread hop: opening the target's parent
(one ``openat2``), the target's ``mkdir``, the bind (``open_tree`` and ``move_mount``, or one or
two ``mount(2)`` calls); ``umount2`` and ``rmdir``.
Each takes microseconds to a few hundred (the ``mkdir`` on a slow disk is the longest), all of it
the kernel's CPU, which a worker thread would not save: measured with 50 calls in flight, handing
the ``mkdir`` to a thread cost the plugin about 300 us more CPU per publish (the hop, and the
worker and the loop taking the GIL from each other) than it freed (``docs/performance.md``). A
warm mount (the digest already recorded as referenced) mounts in one go, with no state to write.

A tree found at start is checked before its first mount (``integrity.Integrity.before_use``,
under the digest's exclusive lock) when start-up has not reached it yet; a warm mount pays one
set lookup for that. Whether a digest's tree is published (its marker) is read once, under the
digest's shared lock,
and then trusted until the next exclusive section of any digest (``locks.DigestLocks
.exclusive_sections``): trees leave ``objects/`` only by collection's rename, which holds the
digest's lock exclusive, so while that count stands a tree seen published is still there. A bind
that fails forgets what was seen.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from collections.abc import Callable

from nodeplugin import errors
from nodeplugin.cache import integrity, layout, locks, mounter, refs, targets, usage, view

log = logging.getLogger(__name__)
TARGET_MODE = 0o750


class Volumes:
    def __init__(
        self,
        cache: layout.Layout,
        *,
        mount: mounter.Mounter,
        references: refs.References,
        usage_store: usage.UsageStore,
        digest_locks: locks.DigestLocks,
        kubelet_dir: str,
        readonly_view: view.View | None = None,
        checks: integrity.Integrity | None = None,
    ) -> None:
        self.cache = cache
        self.checks = checks
        """The start checks (a tree found at start is checked before its first mount)."""
        self.unpublished: Callable[[], None] = lambda: None
        """Called after each unpublish (collection looks whether a held copy lost its last
        Pod: such a mount may be one no reference knows, made before a restart)."""
        self.view = readonly_view
        """Where trees are bound from when it is mounted (``cache.view``)."""
        self.targets = targets.Targets(kubelet_dir)
        self.references = references
        self.usage = usage_store
        self.locks = digest_locks
        self._mounter = mount
        self._per_target = locks.KeyedLock()
        self._seen_published: set[str] = set()
        self._seen_at = digest_locks.exclusive_sections

    async def publish(self, target: str, digest: str) -> bool:
        """Bind ``digest``'s tree on ``target``; False (nothing done) when it is not published.

        ``target`` is canonical (``targets.Targets.canonical``). Raises AlreadyExists when the
        target holds another digest; PermissionDenied when it is, or is reached through, a
        symlink; FailedPrecondition when its parent is missing or something other than a
        directory is there; Internal when the reference cannot be recorded or the mount fails.
        """
        async with self._per_target.hold(target):
            current = self.references.get(target)
            if current == digest:
                return True
            if current is not None:
                raise errors.AlreadyExists(
                    f"target {target} is already published with {current}; not {digest}"
                )
            if self.checks is not None and digest in self.checks.pending:
                await self.checks.before_use(digest)  # a failing tree is moved out of objects/
            async with self.locks.shared(digest):
                if self.usage.is_current(digest, referenced=True):
                    # warm: recorded as referenced already (nothing to write); whether it is
                    # still published is known just before the mount
                    self.references.add(target, digest)
                    return await self._mount(target, digest, check_published=True)
                if not self._published(digest):
                    return False
                self.references.add(target, digest)
                try:
                    await self.usage.mark(digest, referenced=True)
                except OSError as exc:
                    self.references.remove(target)
                    log.error("cannot record the reference of %s on %s: %s", digest, target, exc)
                    raise errors.Internal(
                        f"cannot record the reference to {digest} in the cache state "
                        f"({exc.strerror or exc}); not mounting"
                    ) from exc
                return await self._mount(target, digest, check_published=False)

    async def _mount(self, target: str, digest: str, *, check_published: bool) -> bool:
        """Bind ``digest``'s tree on ``target``, whose reference is recorded already; on any
        failure (or, with ``check_published``, when the tree is not published) the reference
        is dropped again. Called with the digest lock held."""
        bound = False
        try:
            if not check_published or self._published(digest):
                self._bind_tree(target, digest)
                bound = True
        except (OSError, errors.PluginError) as exc:
            self._seen_published.discard(digest)
            self.references.remove(target)
            await self._settle(digest)
            if isinstance(exc, errors.PluginError):
                raise
            log.error("mounting %s on %s failed: %s", digest, target, exc)
            raise errors.Internal(
                f"bind-mounting {digest} on {target} failed: {exc.strerror or exc}"
            ) from exc
        if not bound:
            self.references.remove(target)
            await self._settle(digest)
        return bound

    def _published(self, digest: str) -> bool:
        """``cache.is_published``, read from disk once per exclusive section; called with the
        digest's lock held shared."""
        sections = self.locks.exclusive_sections
        if sections != self._seen_at:
            self._seen_published.clear()  # something may have been removed since
            self._seen_at = sections
        if digest in self._seen_published:
            return True
        if not self.cache.is_published(digest):
            return False
        self._seen_published.add(digest)
        return True

    def _bind_tree(self, target: str, digest: str) -> None:
        """Bind the tree from the read-only view, or from ``objects/`` without one; a view that
        somebody unmounted is given up (a warning) and the tree bound from ``objects/``."""
        seen = self.view.source(digest) if self.view is not None else None
        if seen is None:
            self._bind(self.cache.published_dir(digest), target, readonly_source=False)
            return
        try:
            self._bind(seen, target, readonly_source=True)
        except FileNotFoundError:
            if self.view is None or not self.view.lost():
                raise
            self._bind(self.cache.published_dir(digest), target, readonly_source=False)

    async def unpublish(self, target: str) -> None:
        async with self._per_target.hold(target):
            try:
                self._unbind(target)
            except OSError as exc:
                log.error("unpublishing %s failed: %s", target, exc)
                raise errors.Internal(f"unmounting {target} failed: {exc.strerror or exc}") from exc
            digest = self.references.remove(target)
            if digest is not None:
                await self._settle(digest)
        self.unpublished()

    async def _settle(self, digest: str) -> None:
        """After a reference went away: the last one flips ``referenced`` (best effort)."""
        if self.references.count(digest):
            return
        try:
            await self.usage.mark(digest, referenced=False)
        except OSError as exc:
            # The mount is gone either way; the next start reconciles the flag from mountinfo.
            log.warning("cannot record that %s is unreferenced: %s", digest, exc)

    def _bind(self, source: str, target: str, *, readonly_source: bool) -> None:
        with self.targets.open(target) as opened:
            if opened is None:
                raise errors.FailedPrecondition(
                    f"the parent directory of target path {targets.shown(target)} does not "
                    "exist (kubelet creates it before NodePublishVolume)"
                )
            try:
                os.mkdir(opened.name, TARGET_MODE, dir_fd=opened.parent)
                created = True
            except FileExistsError:
                # mkdir never follows a symlink: whatever is there is judged as it is
                targets.refuse_unusable(opened)
                created = False
            try:
                self._mounter.bind_readonly(source, opened, readonly_source=readonly_source)
            except OSError:
                if created:
                    with contextlib.suppress(OSError):
                        os.rmdir(opened.name, dir_fd=opened.parent)
                raise

    def _unbind(self, target: str) -> None:
        """Unmount and remove the target. The usual case takes two system calls: the unmount
        (which never follows a symlink there) and the ``rmdir``, which fails EBUSY while
        another mount is still stacked on the target, so each one is unmounted in turn."""
        with self.targets.open(target) as opened:
            if opened is None:
                return  # the directory it would be in is gone: nothing mounted there
            if not self._mounter.unmount(opened):
                found = opened.lstat()
                if found is None:
                    return
                if stat.S_ISLNK(found.st_mode):
                    # Never mounted by us (we refuse symlinks), and followed it could lead to
                    # another Pod's volume: neither unmount through it nor remove it.
                    raise targets.symlink_refusal(target)
            for _ in range(mounter.MAX_STACKED):
                if self._remove(opened):
                    return
                # EBUSY: still a mount point (mounts were stacked on the target)
                if not self._mounter.unmount(opened):
                    break
            raise OSError(errno.EBUSY, f"{targets.shown(target)} is still busy after "
                                       f"{mounter.MAX_STACKED} unmounts")

    def _remove(self, opened: targets.Target) -> bool:
        """Remove the unmounted target; False while it is still a mount point."""
        try:
            os.rmdir(opened.name, dir_fd=opened.parent)
        except FileNotFoundError:
            pass
        except NotADirectoryError:
            os.unlink(opened.name, dir_fd=opened.parent)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                return False
            if exc.errno != errno.ENOTEMPTY:
                raise
            # Not ours: a non-empty directory we never mounted is left alone.
            log.warning("target %s: non-empty, not mounted, left alone", opened.path)
        return True
