"""Publish and unpublish targets: record the reference, bind the published tree read-only.

``publish`` holds the digest's lock shared from the check that the tree is published until the
bind is done, so collection (which takes it exclusive) can never remove a tree in between; it
records the reference before binding and refuses the mount when the record cannot be written.
``unpublish`` works from the target path alone and succeeds for targets it never mounted.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os

from nodeplugin import errors
from nodeplugin.cache import layout, locks, mounter, refs, usage

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
    ) -> None:
        self.cache = cache
        self.references = references
        self.usage = usage_store
        self.locks = digest_locks
        self._mounter = mount
        self._targets = locks.KeyedLock()

    async def publish(self, target: str, digest: str) -> bool:
        """Bind ``digest``'s tree on ``target``; False (nothing done) when it is not published.

        Raises AlreadyExists when the target holds another digest, Internal when the reference
        cannot be recorded or the mount fails.
        """
        async with self._targets.hold(target):
            current = self.references.get(target)
            if current == digest:
                return True
            if current is not None:
                raise errors.AlreadyExists(
                    f"target {target} is already published with {current}; not {digest}"
                )
            async with self.locks.shared(digest):
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
                source = str(self.cache.published_path(digest))
                try:
                    await asyncio.to_thread(self._bind, source, target)
                except OSError as exc:
                    self.references.remove(target)
                    await self._settle(digest)
                    log.error("mounting %s on %s failed: %s", digest, target, exc)
                    raise errors.Internal(
                        f"bind-mounting {digest} on {target} failed: {exc.strerror or exc}"
                    ) from exc
        return True

    async def unpublish(self, target: str) -> None:
        async with self._targets.hold(target):
            try:
                await asyncio.to_thread(self._unbind, target)
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

    def _bind(self, source: str, target: str) -> None:
        created = False
        try:
            os.mkdir(target, TARGET_MODE)
            created = True
        except FileExistsError:
            pass
        try:
            self._mounter.bind_readonly(source, target)
        except OSError:
            if created:
                with contextlib.suppress(OSError):
                    os.rmdir(target)
            raise

    def _unbind(self, target: str) -> None:
        for _ in range(mounter.MAX_STACKED):
            if not self._mounter.unmount(target):
                break
        try:
            os.rmdir(target)
        except FileNotFoundError:
            pass
        except NotADirectoryError:
            os.unlink(target)
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            # Not ours: a non-empty directory we never mounted is left alone.
            log.warning("target %s: non-empty, not mounted, left alone", target)
