"""The NodeModelStore ``status`` body, rebuilt from the node every time (never from the last one).

``Facts`` is what the node holds right now: the published trees (and which are quarantined), the
running attempts, the failure records, the live references, the usage records and the cache
filesystem's figures. ``body`` turns them into the wire form. Entries carry a digest, sizes,
times and a reason's meaning, and never a namespace, an artifact, a repository or a Pod.

At most 256 entries: the referenced ones are kept first, then the most recently used; the Ready
message counts what was left out. Entries are listed in digest order, so a status that did not
change is byte-for-byte the same.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from nodeplugin.cache import usage as usages
from nodeplugin.materialize import failures as failure_records
from nodeplugin.materialize import interface
from openapi import reasons, states, wire
from openapi import schema as contract
from openapi.kinds import nodemodelstore

MAX_MODELS = contract.MAX_MODELS
MAX_MESSAGE = 1024
QUARANTINE_SUFFIX = ("; the copy was taken out of use (Pods that mount it keep it until they end) "
                     "and is removed once no Pod mounts it; the next mount materializes it again")


Model = nodemodelstore.ModelEntry
Capacity = nodemodelstore.Capacity
Condition = wire.Condition
Peer = nodemodelstore.Peer


class Status(TypedDict):
    observedGeneration: NotRequired[int]
    capacity: Capacity
    models: list[Model]
    # this node's peer port; None clears one an earlier run wrote (the write is a merge patch)
    peer: NotRequired[Peer | None]
    conditions: list[Condition]


@dataclasses.dataclass(frozen=True, slots=True)
class Facts:
    published: Sequence[str]
    sizes: Mapping[str, int]
    """The manifest size of each published tree (absent when it could not be read)."""
    running: Sequence[interface.Progress]
    failures: Sequence[failure_records.Failure]
    quarantined: Mapping[str, str]
    """Digest -> what the integrity check found (its tree held apart, no longer published)."""
    referenced: frozenset[str]
    usage: Mapping[str, usages.Usage]
    total_bytes: int
    used_bytes: int
    stored_bytes: int
    origins: Mapping[str, states.Origin] = dataclasses.field(default_factory=dict)
    """Where a published tree's bytes came from (``Hub``/``Peer``), when recorded."""


def used_percent(used: int, total: int) -> int:
    """The filesystem's usage rounded down to a multiple of 5."""
    if total <= 0:
        return 0
    return min(100, used * 100 // total // 5 * 5)


def format_time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def models(facts: Facts) -> tuple[list[Model], int]:
    """The entries to list and how many were left out by the 256 cap."""
    entries: dict[str, Model] = {}
    for digest in facts.published:
        # a quarantined tree is never published: a digest published again is a good copy
        entry = _base(digest, facts, states.READY)
        if digest in facts.origins:
            entry["source"] = facts.origins[digest]
        if digest in facts.sizes:
            entry["sizeBytes"] = facts.sizes[digest]
        entries[digest] = entry
    for progress in facts.running:
        if progress.digest in entries:
            continue
        entry = _base(progress.digest, facts, states.DOWNLOADING)
        entry["downloadedBytes"] = progress.received_bytes
        entry["source"] = progress.origin
        if progress.total_bytes is not None:
            entry["sizeBytes"] = progress.total_bytes
        entries[progress.digest] = entry
    for failure in facts.failures:
        if failure.digest in entries:
            continue
        entry = _base(failure.digest, facts, states.FAILED)
        entry["reason"] = failure.reason.value
        entry["message"] = _cut(failure.message)
        if failure.retry_time is not None:
            entry["retryTime"] = format_time(failure.retry_time)
        entries[failure.digest] = entry
    for digest, message in facts.quarantined.items():
        if digest in entries:
            continue
        entry = _base(digest, facts, states.FAILED)
        entry["reason"] = reasons.FailureReason.INTEGRITY_MISMATCH.value
        entry["message"] = _cut(message + QUARANTINE_SUFFIX)
        entries[digest] = entry
    if len(entries) <= MAX_MODELS:
        return [entries[d] for d in sorted(entries)], 0
    oldest = datetime.datetime.min.replace(tzinfo=datetime.UTC)

    def rank(digest: str) -> tuple[bool, float, str]:
        record = facts.usage.get(digest)
        moment = record.last_used if record is not None else oldest
        return (digest not in facts.referenced, -moment.timestamp(), digest)

    kept = sorted(sorted(entries, key=rank)[:MAX_MODELS])
    return [entries[d] for d in kept], len(entries) - MAX_MODELS


def _base(digest: str, facts: Facts, state: states.ModelState) -> Model:
    entry = Model(digest=digest, state=state, referenced=digest in facts.referenced)
    record = facts.usage.get(digest)
    if record is not None:
        entry["lastUsedTime"] = format_time(record.last_used)
    return entry


def _cut(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def capacity(facts: Facts) -> Capacity:
    return {
        "totalBytes": facts.total_bytes,
        "storedBytes": facts.stored_bytes,
        "usedPercent": used_percent(facts.used_bytes, facts.total_bytes),
    }


def body(
    facts: Facts,
    *,
    observed_generation: int | None,
    conditions: list[Condition],
    listed: list[Model],
) -> Status:
    status: Status = {"capacity": capacity(facts), "models": listed, "conditions": conditions}
    if observed_generation is not None:
        status["observedGeneration"] = observed_generation
    return status


def without_progress(status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` without its progress fields (``downloadedBytes``, and ``storedBytes`` while a
    download runs): what is written at once when it changes."""
    plain = {key: value for key, value in status.items() if key != "models"}
    listed = nodemodelstore.models(nodemodelstore.of_status(status))
    downloading = any(nodemodelstore.entry_state(m) == states.DOWNLOADING for m in listed)
    plain["models"] = [
        {k: v for k, v in m.items() if k != "downloadedBytes"} for m in listed
    ]
    if downloading:
        plain["capacity"] = {k: v for k, v in (status.get("capacity") or {}).items()
                             if k != "storedBytes"}
    return plain


def progress_of(status: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """``digest -> (downloadedBytes, sizeBytes)`` of the downloads listed in ``status``."""
    return {
        nodemodelstore.entry_digest(m): (nodemodelstore.entry_downloaded(m) or 0,
                                         nodemodelstore.entry_size(m) or 0)
        for m in nodemodelstore.models(nodemodelstore.of_status(status))
        if nodemodelstore.entry_state(m) == states.DOWNLOADING
    }
