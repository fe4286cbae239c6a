"""Composing the node's status from the running pieces: the facts, then the conditions.

``Composer.compose`` reads everything from memory (the cache inventory, the references, the
usage records, the failure and quarantine records, the running attempts) plus one ``statvfs``;
the manifest size of a tree it has not seen yet is read once, in a thread. Conditions keep their
``lastTransitionTime`` while their status stays the same (in memory: a restart starts afresh,
since status is rebuilt from the node and never read back).

What the composer reads of each piece is a small Protocol below, met by the plugin's own pieces
(``cache.inventory``, ``cache.trees``, the materializer, ``materialize.failures``,
``cache.quarantine``, ``cache.refs``, ``cache.usage``, ``materialize.capacity``); the fleet
benchmark's hollow nodes (``bench/fleet``) pass simulated ones (no disk, no hub) to the same
composer, reporter and status rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from nodeplugin.cache import quarantine, usage
from nodeplugin.materialize import capacity, interface
from nodeplugin.materialize import failures as failure_records
from nodeplugin.nodestore import apply
from nodeplugin.nodestore import status as statuses
from openapi import reasons, states, wire
from timing import clock as clocks


class Stock(Protocol):
    """The published trees and the bytes stored (``cache.inventory.Inventory``)."""

    def digests(self) -> list[str]: ...

    def stored_bytes(self, running: Iterable[tuple[str, int]]) -> int: ...


class TreeFacts(Protocol):
    """A published tree's manifest size (``cache.trees.Trees``)."""

    def size_bytes(self, digest: str) -> int | None: ...


class Running(Protocol):
    """The attempts in progress (``interface.Materializer``)."""

    def running(self) -> list[interface.Progress]: ...


class Failures(Protocol):
    """The download failure records (``materialize.failures.Failures``)."""

    def all(self) -> list[failure_records.Failure]: ...


class Held(Protocol):
    """The quarantine records (``cache.quarantine.Quarantine``)."""

    def all(self) -> list[quarantine.Entry]: ...


class Referenced(Protocol):
    """The digests live mounts reference (``cache.refs.References``)."""

    def digests(self) -> set[str]: ...


class UsageRecords(Protocol):
    """The last-used hour of each digest (``cache.usage.UsageStore``)."""

    def all(self) -> dict[str, usage.Usage]: ...


class Space(Protocol):
    """The cache filesystem's figures (``materialize.capacity.Capacity``)."""

    def usage(self) -> capacity.Usage: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Verdicts:
    """What collection last found, for the conditions."""

    skipped: Callable[[], str | None]
    nothing_to_remove: Callable[[], bool]
    over_high: Callable[[int, int], None] = lambda used, total: None
    """Told every report's usage (collection runs when it passes the high watermark)."""


class Conditions:
    """Renders conditions, keeping ``lastTransitionTime`` until a status changes."""

    def __init__(self, clock: clocks.Clock) -> None:
        self._clock = clock
        self._since: dict[str, tuple[str, str]] = {}

    def condition(self, kind: str, status: wire.ConditionStatus, reason: str, message: str,
                  generation: int | None) -> statuses.Condition:
        previous = self._since.get(kind)
        if previous is None or previous[0] != status:
            previous = (status, statuses.format_time(self._clock.now()))
            self._since[kind] = previous
        found: statuses.Condition = {
            "type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": previous[1],
        }
        if generation is not None:
            found["observedGeneration"] = generation
        return found


class Composer:
    def __init__(
        self,
        *,
        node: apply.NodeState,
        stock: Stock,
        tree_facts: TreeFacts,
        materializer: Running,
        failures: Failures,
        quarantined: Held,
        references: Referenced,
        usage_store: UsageRecords,
        ledger: Space,
        verdicts: Verdicts,
        clock: clocks.Clock,
        origins: Callable[[], Mapping[str, states.Origin]] = dict,
        peer: Callable[[], str] | None = None,
    ) -> None:
        """``origins``: where each published tree's bytes came from (``cache.origins``);
        ``peer``: the URL this node's peer port is published at, "" when it serves none (then
        ``status.peer`` is cleared); without it ``status.peer`` is left alone."""
        self._node = node
        self._stock = stock
        self._trees = tree_facts
        self._materializer = materializer
        self._failures = failures
        self._quarantine = quarantined
        self._references = references
        self._usage = usage_store
        self._ledger = ledger
        self._verdicts = verdicts
        self._conditions = Conditions(clock)
        self._sizes: dict[str, int] = {}
        self._origins = origins
        self._peer = peer

    async def facts(self) -> statuses.Facts:
        published = self._stock.digests()
        unknown = [d for d in published if d not in self._sizes]
        if unknown:
            found = await asyncio.to_thread(lambda: {d: self._trees.size_bytes(d)
                                                     for d in unknown})
            self._sizes.update({d: size for d, size in found.items() if size is not None})
        running = self._materializer.running()
        space = self._ledger.usage()
        return statuses.Facts(
            published=published,
            sizes={d: self._sizes[d] for d in published if d in self._sizes},
            running=running,
            failures=self._failures.all(),
            quarantined={e.digest: e.message for e in self._quarantine.all()},
            referenced=frozenset(self._references.digests()),
            usage=self._usage.all(),
            total_bytes=space.total_bytes,
            used_bytes=space.used_bytes,
            stored_bytes=self._stock.stored_bytes((p.digest, p.staged) for p in running),
            origins=self._origins(),
        )

    async def compose(self) -> statuses.Status:
        facts = await self.facts()
        self._verdicts.over_high(facts.used_bytes, facts.total_bytes)
        listed, left_out = statuses.models(facts)
        node = self._node
        generation = node.observed_generation
        if node.invalid is not None:
            ready = self._conditions.condition(
                reasons.READY, "False", reasons.INVALID_CONFIGURATION,
                _sentences(f"the spec fails the plugin's check: {node.invalid}; no download "
                           "starts and nothing is collected, published models still mount",
                           _left_out(left_out)),
                generation)
        else:
            notes = list(node.effective.notes) if node.effective is not None else []
            skipped = self._verdicts.skipped()
            if skipped:
                notes.append(skipped)
            ready = self._conditions.condition(
                reasons.READY, "True", reasons.SERVING,
                _sentences("serving mounts" + (f" and applying generation {generation}"
                                               if generation is not None else ""),
                           *notes, _left_out(left_out)),
                generation)
        if self._verdicts.nothing_to_remove():
            low = self._conditions.condition(
                reasons.CAPACITY_LOW, "True", reasons.NOTHING_TO_REMOVE,
                "usage is above the high watermark and everything on the cache is in use or "
                "pinned", generation)
        else:
            low = self._conditions.condition(
                reasons.CAPACITY_LOW, "False", reasons.WITHIN_WATERMARKS,
                "collection can keep usage within the watermarks", generation)
        status = statuses.body(facts, observed_generation=generation, conditions=[ready, low],
                               listed=listed)
        if self._peer is not None:
            url = self._peer()
            status["peer"] = {"url": url} if url else None
        return status


def _left_out(count: int) -> str:
    if not count:
        return ""
    return (f"{count} more entries are not listed in status.models (it holds at most "
            f"{statuses.MAX_MODELS}: referenced ones first, then the most recently used)")


def _sentences(*parts: str) -> str:
    return "; ".join(part for part in parts if part)
