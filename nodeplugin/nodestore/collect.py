"""Collection: removing unused content so the cache stays within its watermarks.

It runs when usage passes the high watermark, when a reservation does not fit (``make_room``),
and every five minutes. Under pressure (usage above the high watermark, or a reservation that
needs room) it removes, oldest ``lastUsedTime`` first, until usage is down to the low watermark
(or, for a reservation, low enough for it to fit):

- published trees no Pod references, unreferenced for at least ten minutes;
- partial downloads with no running attempt that no mount asked for in 24 hours.

Every run also drops failure records 24 hours after their last failure once nothing else of
their digest is left (no tree, no partial, no attempt), and removes quarantined trees as soon as
no Pod references them. A digest in ``spec.pinned`` is never a candidate, and a referenced tree
or a partial being written never is either. References come from the node's own mount table
(read again before each run, together with the plugin's table), never from the API.

A digest in ``spec.evict`` (a prefetch deleted with ``cleanupOnDelete``) goes at every run, whatever
the watermarks and without the ten-minute grace, as soon as no Pod references it and it is not
pinned: its tree and its partial downloads with no running attempt. While one is left, collection
runs every minute (and at once when a spec applies or a mount ends), and each removal is logged
as asked by the spec.

Nothing is removed while the mount table cannot be read, before a spec was applied, or while
the spec fails its check; ``skipped`` then says why, for the Ready message.

A tree is removed under its digest's exclusive lock (mounts hold it shared from the check that
the tree is published until the bind), by one ``rename`` out of ``objects/`` into ``trash/``
after the references were checked again; the files are deleted afterwards, outside the lock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
import pathlib
import secrets
from collections.abc import Callable, Iterable

from nodeplugin.cache import fsutil, inventory, layout, locks, quarantine, refs, stale, trees, usage
from nodeplugin.materialize import capacity
from nodeplugin.materialize import failures as failure_records
from nodeplugin.nodestore import apply
from timing import clock as clocks

log = logging.getLogger(__name__)

PERIOD_SECONDS = 300.0
EVICT_PERIOD_SECONDS = 60.0
UNREFERENCED_FOR = datetime.timedelta(minutes=10)
FAILURES_KEPT_FOR = datetime.timedelta(hours=24)
TRASH = "trash"


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    digest: str
    last_used: datetime.datetime
    path: str
    tree: bool
    """A published tree (else a partial download)."""


@dataclasses.dataclass
class Outcome:
    removed: list[str] = dataclasses.field(default_factory=list)
    removed_bytes: int = 0
    skipped: str | None = None
    records_dropped: int = 0
    evicted: list[str] = dataclasses.field(default_factory=list)
    """Digests removed because ``spec.evict`` asked."""


class Collector:
    def __init__(
        self,
        cache: layout.Layout,
        *,
        references: refs.References,
        usage_store: usage.UsageStore,
        digest_locks: locks.DigestLocks,
        failures: failure_records.Failures,
        quarantined: quarantine.Quarantine,
        running: Callable[[], Iterable[str]],
        ledger: capacity.Capacity,
        stock: inventory.Inventory,
        tree_facts: trees.Trees,
        node: apply.NodeState,
        clock: clocks.Clock,
        read_mountinfo: Callable[[], str] = refs.read_mountinfo,
        removed: Callable[[list[str]], None] = lambda digests: None,
        measure: Callable[[str], int] | None = None,
    ) -> None:
        self._cache = cache
        self._references = references
        self._usage = usage_store
        self._locks = digest_locks
        self._failures = failures
        self._quarantine = quarantined
        self._running = running
        self._ledger = ledger
        self._stock = stock
        self._trees = tree_facts
        self._node = node
        self._clock = clock
        self._read_mountinfo = read_mountinfo
        self._removed = removed
        self._measure = measure or (lambda path: inventory.allocated_bytes(_path(path)))
        self._started = clock.now()
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self.trash = cache.root / TRASH
        self.removed_bytes = 0
        """Bytes collection removed since start (``gc_removed_bytes_total``)."""
        self.skipped: str | None = None
        """Why the last collection removed nothing on purpose; None when it ran."""
        self.nothing_to_remove = False
        """The last run left usage above the high watermark with nothing left to remove."""
        self.runs = 0
        self._over = False
        self._evict_left: set[str] = set()
        """``spec.evict`` digests a run found still here (referenced or being written)."""

    # --- triggers -------------------------------------------------------------------

    def poke(self) -> None:
        """Run soon (usage passed the high watermark, a quarantined tree lost its last Pod)."""
        self._wake.set()

    def observe(self, used: int, total: int) -> None:
        """Told the usage every status report reads: passing the high watermark runs
        collection at once (not at the next five-minute run)."""
        effective = self._node.effective
        over = effective is not None and used > total * effective.high_percent // 100
        if over and not self._over:
            self.poke()
        self._over = over

    async def make_room(self, needed: int) -> None:
        """The capacity ledger's hook: a reservation of ``needed`` bytes does not fit."""
        await self.collect(needed=needed)

    async def run(self) -> None:
        """Every five minutes, and whenever poked."""
        while True:
            await clocks.wait(self._wake, self._clock, self._period())
            self._wake.clear()
            try:
                await self.collect()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("collection failed; trying again at the next run")

    def _period(self) -> float:
        """A minute while ``spec.evict`` names a digest still here, else five minutes."""
        spec = self._node.applied
        if spec is not None and any(d in self._evict_left
                                    for d in spec.evict | spec.force_evict):
            return EVICT_PERIOD_SECONDS
        return PERIOD_SECONDS

    # --- one run --------------------------------------------------------------------

    async def collect(self, *, needed: int = 0) -> Outcome:
        async with self._lock:
            outcome = await self._collect(needed)
        self.runs += 1
        if outcome.removed or outcome.records_dropped:
            self._removed(outcome.removed)
        return outcome

    def _skip(self, outcome: Outcome, why: str) -> Outcome:
        if why != self.skipped:
            log.warning("%s; nothing removed", why)
        self.skipped = outcome.skipped = why
        return outcome

    def _skip_reason(self) -> str | None:
        if self._node.invalid is not None:
            return "collection skipped: the node's spec fails its check"
        if self._node.applied is None:
            return "collection skipped: no configuration has been applied yet"
        return None

    async def _collect(self, needed: int) -> Outcome:
        outcome = Outcome()
        try:
            text = await asyncio.to_thread(self._read_mountinfo)
            mounts = refs.parse_mountinfo(text)
            found = refs.scan(mounts, str(self._cache.objects))
            mounted = {layout.digest_of_hex(h) for h in found.values()}
        except (OSError, layout.LayoutError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) else str(exc)
            return self._skip(outcome, "collection skipped: the node's mount table could not "
                              f"be read ({detail})")
        referenced = self._references.digests() | mounted
        applied = self._node.applied
        if applied is not None and applied.pause_collection:
            # the operator's switch (a plugin rollback): nothing at all is removed
            return self._skip(outcome, "collection paused by spec.operations.pauseCollection"
                              + (f" (ModelStore {applied.store})" if applied.store else ""))
        # A damaged tree goes as soon as no Pod mounts it, whatever the spec says.
        await self._remove_quarantined(outcome)
        why = self._skip_reason()
        if why is not None:
            return self._skip(outcome, why)
        self.skipped = None
        effective, spec = self._node.effective, self._node.applied
        assert effective is not None and spec is not None
        pinned = spec.pinned
        # the worker's evictions spare a pinned digest; the operator's (the pool's) do not
        await self._evict((spec.evict - pinned) | spec.force_evict, referenced, outcome)
        await self._drop_old_failures(outcome)
        space = self._ledger.usage()
        high = space.total_bytes * effective.high_percent // 100
        low = space.total_bytes * effective.low_percent // 100
        target = low
        if needed:
            target = min(low, high - self._ledger.outstanding() - needed)
        elif space.used_bytes <= high:
            self.nothing_to_remove = False
            return outcome
        used = space.used_bytes
        queue = self.candidates(referenced, pinned)
        position = 0
        while position < len(queue) and used > target:
            # Choose as much as should bring usage to the target, by what each measured, then
            # remove it together and read the usage again (measurements can be short).
            batch, projected = [], used
            while position < len(queue) and projected > target:
                candidate = queue[position]
                position += 1
                batch.append(candidate)
                projected -= max(1, await self._estimate(candidate))
            await self._remove(batch, outcome)
            used = self._ledger.usage().used_bytes
        self.nothing_to_remove = used > high
        if outcome.removed:
            log.info("collection removed %d items (%d bytes); usage now %d of %d bytes",
                     len(outcome.removed), outcome.removed_bytes, used, space.total_bytes)
        return outcome

    async def _evict(self, evict: frozenset[str], referenced: set[str],
                     outcome: Outcome) -> None:
        """Remove what ``spec.evict`` names now: its tree and idle partials, unless a Pod
        references it (then at a later run, once unmounted)."""
        left: set[str] = set()
        if not evict:
            self._evict_left = left
            return
        running = set(self._running())
        partials = await asyncio.to_thread(self._cache.partials)
        batch: list[Candidate] = []
        now = self._clock.now()
        for digest in sorted(evict):
            published = await asyncio.to_thread(self._cache.is_published, digest)
            held = [p for p in partials if p.digest == digest]
            if not published and not held:
                continue
            if digest in referenced or digest in running:
                left.add(digest)
                continue
            if published:
                batch.append(Candidate(digest, now, str(self._cache.published_path(digest)),
                                       tree=True))
            batch.extend(Candidate(digest, now, str(p.path), tree=False) for p in held)
        before = list(outcome.removed)
        await self._remove(batch, outcome)
        gone = sorted(set(outcome.removed) - set(before))
        left |= {c.digest for c in batch} - set(gone)
        self._evict_left = left
        if gone:
            outcome.evicted.extend(gone)
            log.info("removed %s as the node's spec.evict asks (no Pod mounts it, nothing pins "
                     "it)", ", ".join(gone))

    def candidates(self, referenced: set[str], pinned: frozenset[str]) -> list[Candidate]:
        """What may go, oldest ``lastUsedTime`` first (trees and partials together)."""
        now = self._clock.now()
        records = self._usage.all()
        running = set(self._running())
        found: list[Candidate] = []
        for digest in self._stock.digests():
            if digest in referenced or digest in pinned:
                continue
            record = records.get(digest)
            if now - self._last_activity(digest, record) < UNREFERENCED_FOR:
                continue
            path = str(self._cache.published_path(digest))
            last = record.last_used if record else _published_time(path, self._started)
            found.append(Candidate(digest, last, path, tree=True))
        for partial in stale.removable_partials(self._cache, self._usage, running=running,
                                                now=now):
            if partial.digest in pinned:
                continue
            record = records.get(partial.digest)
            path = str(partial.path)
            last = record.last_used if record else _published_time(path, self._started)
            found.append(Candidate(partial.digest, last, path, tree=False))
        found.sort(key=lambda c: (c.last_used, c.digest, c.path))
        return found

    def _last_activity(self, digest: str, record: usage.Usage | None) -> datetime.datetime:
        """When the digest was last mounted, unmounted or asked for: exact when this process
        saw it, else the end of its recorded hour (never earlier than it really was)."""
        seen = self._usage.last_activity(digest)
        if seen is not None:
            return seen
        if record is not None:
            return record.last_used + datetime.timedelta(hours=1)
        return self._started

    async def _estimate(self, candidate: Candidate) -> int:
        known = self._stock.bytes_of(candidate.digest, tree=candidate.tree)
        if known is not None:
            return known
        return await asyncio.to_thread(self._measure, candidate.path)

    async def _remove(self, batch: list[Candidate], outcome: Outcome) -> None:
        """Take each candidate out of ``objects/`` (or ``partial/``) by one rename, after
        checking again that nothing uses it; then delete them all in one worker thread."""
        moved: list[tuple[Candidate, str]] = []
        for candidate in batch:
            digest = candidate.digest
            if candidate.tree:
                async with self._locks.exclusive(digest):
                    if self._references.count(digest):
                        continue
                    gone = self._move_to_trash(candidate.path)
            else:
                # No await between the check and the rename: no attempt can start in between.
                if digest in set(self._running()):
                    continue
                gone = self._move_to_trash(candidate.path)
            if gone is not None:
                moved.append((candidate, gone))
        if not moved:
            return
        sizes = await asyncio.to_thread(self._delete, [path for _, path in moved])
        for (candidate, _), size in zip(moved, sizes, strict=True):
            self.removed_bytes += size
            outcome.removed_bytes += size
            outcome.removed.append(candidate.digest)
            log.debug("collected %s %s (%d bytes, last used %s)", "tree" if candidate.tree
                      else "partial download", candidate.digest, size,
                      candidate.last_used.isoformat())
        await self._settle([candidate.digest for candidate, _ in moved])

    def _delete(self, paths: list[str]) -> list[int]:
        sizes = []
        for path in paths:
            sizes.append(self._measure(path))
            fsutil.remove_tree(_path(path))
        return sizes

    async def _remove_quarantined(self, outcome: Outcome) -> None:
        """Delete every held tree no mount shows any more; a digest's record goes with its last
        held tree (under its lock: a quarantine holds a tree, then records it). The held trees
        are listed *before* the mount table is read: a tree moved after the table was read
        would not show its mounts there yet."""
        held = await asyncio.to_thread(self._quarantine.held)
        shown: set[str] = set()
        if held:
            try:
                text = await asyncio.to_thread(self._read_mountinfo)
            except OSError as exc:
                log.warning("quarantined copies kept: the mount table could not be read (%s)",
                            exc.strerror or exc)
                return
            shown = set(refs.under(refs.parse_mountinfo(text), str(self._cache.held)).values())
        for digest, path in held:
            if path.name in shown:
                continue
            size = (await asyncio.to_thread(self._delete, [str(path)]))[0]
            self.removed_bytes += size
            outcome.removed_bytes += size
            outcome.removed.append(digest)
            log.warning("removed the quarantined copy of %s (%d bytes) once no Pod mounted it",
                        digest, size)
        kept = {digest for digest, path in held if path.name in shown}
        for entry in self._quarantine.all():
            if entry.digest in kept:
                continue
            async with self._locks.exclusive(entry.digest):
                still = await asyncio.to_thread(self._quarantine.held)
                if any(digest == entry.digest for digest, _ in still):
                    continue
                await asyncio.to_thread(self._quarantine.remove, entry.digest)
            await self._settle([entry.digest])

    async def _drop_old_failures(self, outcome: Outcome) -> None:
        now = self._clock.now()
        running = set(self._running())
        partial = {p.digest for p in await asyncio.to_thread(self._cache.partials)}
        for failure in self._failures.all():
            digest = failure.digest
            if now - failure.last_failure < FAILURES_KEPT_FOR:
                continue
            if digest in running or digest in partial:
                continue
            if await asyncio.to_thread(self._cache.is_published, digest):
                continue
            await asyncio.to_thread(self._failures.clear, digest)
            outcome.records_dropped += 1
            log.info("dropped the failure record of %s (last failure %s)", digest,
                     failure.last_failure.isoformat())

    async def _settle(self, digests: list[str]) -> None:
        """After removing something of these digests: measure them again, and forget what
        described a digest once nothing of it is left on the node."""

        def left() -> list[str]:
            partial = {p.digest for p in self._cache.partials()}
            gone = []
            for digest in digests:
                self._stock.refresh(digest)
                if not self._cache.is_published(digest) and digest not in partial:
                    gone.append(digest)
            return gone

        gone = [d for d in await asyncio.to_thread(left) if not self._references.count(d)]
        for digest in digests:
            self._trees.forget(digest)
        if gone:
            try:
                await self._usage.forget(gone)
            except OSError as exc:
                log.warning("cannot drop the usage records of removed content: %s", exc)

    def _move_to_trash(self, path: str) -> str | None:
        """Rename ``path`` into ``trash/`` (one step: it stops being published or resumable
        at once); None when it is already gone."""
        os.makedirs(self.trash, mode=0o700, exist_ok=True)
        destination = os.path.join(self.trash, f"{os.path.basename(path)}.{secrets.token_hex(4)}")
        try:
            os.rename(path, destination)
        except FileNotFoundError:
            return None
        return destination

def _path(text: str) -> pathlib.Path:
    return pathlib.Path(text)


def _published_time(path: str, fallback: datetime.datetime) -> datetime.datetime:
    """For what has no usage record: when its directory last changed (a tree's publication,
    a partial's last write)."""
    try:
        return datetime.datetime.fromtimestamp(os.stat(path).st_mtime, datetime.UTC)
    except OSError:
        return fallback
