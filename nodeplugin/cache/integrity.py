"""Published trees are checked before use, and quarantined when they fail.

Every tree published when the plugin starts is *pending*: it is held to ``check.problem`` (its
stored manifest hashes to its digest, its files are the manifest's, of its sizes) once, by a
background pass (``check_all``) that starts as the socket serves, or by the first mount of it
(``before_use``) if that comes first, so the socket does not wait for a thousand trees to be
read. A mount checks under the digest's exclusive lock, so no mount binds the tree while it is
judged; the pass checks in batches without locks and judges a tree that fails again under its
lock before quarantining it (a tree leaves *pending* only once it passed, or was quarantined).
A tree published by this process was verified as it arrived and is never pending.

A cache of an older format (``cache.convert``) is converted by the same pass: with
``converting`` set, each tree found at start is converted under its lock just before its check
(every tree then takes the locked path), and the format is recorded once none is left pending.

A tree that fails is quarantined under the same lock (``quarantine``, which the scrub calls too):
moved out of ``objects/`` (``Quarantine.hold``: mounted Pods keep it) and recorded. The digest
is then simply not published: its next mount materializes it again. ``changed`` is told the
digest afterwards (the status, the inventory, collection).
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import logging
import time
from collections.abc import Callable, Iterable

from nodeplugin.cache import check, convert, layout, locks, quarantine

log = logging.getLogger(__name__)
TreeId = quarantine.TreeId
BATCH = 64
"""Trees the start pass checks per worker-thread call."""


class Integrity:
    def __init__(
        self,
        cache: layout.Layout,
        quarantined: quarantine.Quarantine,
        digest_locks: locks.DigestLocks,
        *,
        now: Callable[[], datetime.datetime],
        changed: Callable[[str], None] = lambda digest: None,
        converting: bool = False,
    ) -> None:
        """``converting``: the cache is of an older format; its trees are converted as they
        are checked (``cache.convert``)."""
        self._cache = cache
        self.converting = converting
        self.converted = 0
        """Files conversion pointed at a copy another tree had already stored."""
        self._quarantine = quarantined
        self._locks = digest_locks
        self._now = now
        self.changed = changed
        """Called with each digest quarantined (set once the node store exists)."""
        self.pending: set[str] = set()
        """Trees found at start and not checked yet."""
        self.checked = 0
        self.failures: collections.Counter[check.Check] = collections.Counter()
        """What the start checks found, by the check that failed (the metrics' ``start``)."""
        self.done = asyncio.Event()
        """Set once every tree found at start was checked."""
        self.seconds: float | None = None
        """How long the start checks took, once done."""

    def expect(self, digests: Iterable[str]) -> None:
        """The trees published at start: each is checked before its first use."""
        self.pending = set(digests)
        if not self.pending:
            self.done.set()

    def legacy(self) -> list[str]:
        """Trees a plugin before this one quarantined in place (a record, the tree still under
        ``objects/`` and none held): held now, before anything can mount them. Blocking; call
        at start, before the socket serves."""
        held = {digest for digest, _ in self._quarantine.held()}
        moved = []
        for entry in self._quarantine.all():
            if entry.digest not in held and self._quarantine.hold(entry.digest) is not None:
                log.warning("integrity: %s was quarantined in place; held apart now",
                            entry.digest)
                moved.append(entry.digest)
        return moved

    async def before_use(self, digest: str) -> None:
        """Check ``digest``'s tree first when start-up has not reached it yet (a set lookup
        otherwise: nothing else on the warm path)."""
        if digest in self.pending:
            await self._check(digest)

    async def check_all(self) -> None:
        """The start pass: the pending trees ``BATCH`` at a time in a worker thread, without
        their locks (a tree that passes is no longer pending, which is all a mount looks at);
        one that fails is judged again under its lock, and quarantined there."""
        began = time.monotonic()
        try:
            todo = sorted(self.pending)
            if self.converting:
                for digest in todo:
                    await self._check(digest)
                await asyncio.to_thread(convert.finish, self._cache)
                self.converting = False
                todo = []
                log.info("cache converted to format %d (%d files shared with another tree)",
                         layout.FORMAT, self.converted)
            for first in range(0, len(todo), BATCH):
                batch = [d for d in todo[first:first + BATCH] if d in self.pending]
                judged = await asyncio.to_thread(self._judge, batch)
                for digest, found in zip(batch, judged, strict=True):
                    if digest not in self.pending:
                        continue  # a mount checked it meanwhile
                    if found is None:
                        self.pending.discard(digest)
                        self.checked += 1
                    else:
                        await self._check(digest)
        finally:
            self.seconds = time.monotonic() - began
            self.done.set()
        failed = sum(self.failures.values())
        log.info("start checks: %d published trees checked in %.3fs, %d quarantined",
                 self.checked, self.seconds, failed)

    def _judge(self, digests: list[str]) -> list[tuple[check.Check, str] | None]:
        return [check.problem(self._cache, digest) for digest in digests]

    def _convert_and_judge(self, digest: str) -> tuple[check.Check, str] | None:
        if self.converting:
            self.converted += convert.tree(self._cache, digest)
        return check.problem(self._cache, digest)

    async def _check(self, digest: str) -> None:
        async with self._locks.exclusive(digest):
            if digest not in self.pending:
                return  # checked meanwhile (by the pass or another mount)
            found = await asyncio.to_thread(self._convert_and_judge, digest)
            self.pending.discard(digest)
            self.checked += 1
            if found is None:
                return
            kind, detail = found
            self.failures[kind] += 1
            log.error("integrity: %s fails its check at start: %s; quarantined (the next mount "
                      "materializes it again)", digest, detail)
            held = await asyncio.to_thread(self._hold, digest, kind, None)
        if held:
            self.changed(digest)

    async def quarantine(self, digest: str, kind: check.Check,
                         tree: TreeId | None = None) -> bool:
        """Quarantine ``digest``'s tree (``tree``: only if it is still the one judged); False
        when there was nothing to quarantine."""
        async with self._locks.exclusive(digest):
            self.pending.discard(digest)
            held = await asyncio.to_thread(self._hold, digest, kind, tree)
        if held:
            self.changed(digest)
        return held

    def _hold(self, digest: str, kind: check.Check, tree: TreeId | None) -> bool:
        if self._quarantine.hold(digest, tree) is None:
            return False
        self._quarantine.add(digest, check.MESSAGES[kind], self._now())
        return True
