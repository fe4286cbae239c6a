"""Publish and unpublish targets: record the reference, bind the published tree read-only.

``publish`` holds the digest's lock shared from the check that the tree is published until the
bind is done, so collection (which takes it exclusive) can never remove a tree in between; it
records the reference before binding and refuses the mount when the record cannot be written.
``unpublish`` works from the target path alone and succeeds for targets it never mounted.
Both reach the target through ``targets`` (no symlink below the kubelet directory is followed):
a symlink at or on the way to a target is refused, never mounted over and never unmounted
through.

Publishing runs the target's walk and the mount system calls on the event loop. They take tens
to a few hundred microseconds (creating the target directory is the longest); in a worker thread
each of them needed the GIL back from the busy loop afterwards, several times per mount, and with
50 mounts in flight that made the p99 of a warm publish 80-130 ms against 65-78 ms inline
(``docs/performance.md``). A warm mount (the digest already recorded as referenced) checks the
marker and mounts in one go, with no state to write. Unpublishing stays in a worker thread: an
unmount may sleep milliseconds in the kernel, which inline would stop every other call.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import stat

from nodeplugin import errors
from nodeplugin.cache import layout, locks, mounter, refs, targets, usage

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
    ) -> None:
        self.cache = cache
        self.targets = targets.Targets(kubelet_dir)
        self.references = references
        self.usage = usage_store
        self.locks = digest_locks
        self._mounter = mount
        self._per_target = locks.KeyedLock()

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
            async with self.locks.shared(digest):
                if self.usage.is_current(digest, referenced=True):
                    # warm: recorded as referenced already (nothing to write); the marker is
                    # checked just before the mount
                    self.references.add(target, digest)
                    return await self._mount(target, digest, check_published=True)
                if not self.cache.is_published(digest):
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
            if not check_published or self.cache.is_published(digest):
                await self._bind(str(self.cache.published_path(digest)), target)
                bound = True
        except (OSError, errors.PluginError) as exc:
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

    async def _settle(self, digest: str) -> None:
        """After a reference went away: the last one flips ``referenced`` (best effort)."""
        if self.references.count(digest):
            return
        try:
            await self.usage.mark(digest, referenced=False)
        except OSError as exc:
            # The mount is gone either way; the next start reconciles the flag from mountinfo.
            log.warning("cannot record that %s is unreferenced: %s", digest, exc)

    async def _bind(self, source: str, target: str) -> None:
        with self.targets.open(target) as opened:
            if opened is None:
                raise errors.FailedPrecondition(
                    f"the parent directory of target path {targets.shown(target)} does not "
                    "exist (kubelet creates it before NodePublishVolume)"
                )
            created = False
            if targets.refuse_unusable(opened) is None:
                await asyncio.get_running_loop().run_in_executor(
                    None, functools.partial(os.mkdir, opened.name, TARGET_MODE,
                                            dir_fd=opened.parent))
                created = True
            try:
                self._mounter.bind_readonly(source, opened)
            except OSError:
                if created:
                    with contextlib.suppress(OSError):
                        os.rmdir(opened.name, dir_fd=opened.parent)
                raise

    def _unbind(self, target: str) -> None:
        with self.targets.open(target) as opened:
            if opened is None:
                return  # the directory it would be in is gone: nothing mounted there
            found = opened.lstat()
            if found is None:
                return
            if stat.S_ISLNK(found.st_mode):
                # Never mounted by us (we refuse symlinks), and followed it could lead to
                # another Pod's volume: neither unmount through it nor remove it.
                raise targets.symlink_refusal(target)
            for _ in range(mounter.MAX_STACKED):
                if not self._mounter.unmount(opened):
                    break
            try:
                os.rmdir(opened.name, dir_fd=opened.parent)
            except FileNotFoundError:
                pass
            except NotADirectoryError:
                os.unlink(opened.name, dir_fd=opened.parent)
            except OSError as exc:
                if exc.errno != errno.ENOTEMPTY:
                    raise
                # Not ours: a non-empty directory we never mounted is left alone.
                log.warning("target %s: non-empty, not mounted, left alone", target)
