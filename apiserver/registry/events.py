"""Watch events: storage events for a key prefix turned into Kubernetes watch semantics.

Initial state (when asked, or implied by resourceVersion unset/"0"), the initial-events-end
bookmark for sendInitialEvents, live changes strictly after the start revision, selector
transitions as ADDED/DELETED, and a final ERROR (410) when the start revision is gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

from apiserver.registry import codec, options, selectors, statuses
from apiserver.storage import interface

SplitKey = Callable[[str], tuple[str, str]]
"""``(namespace, name)`` of a storage key."""
Present = Callable[[interface.Record], interface.Record]
"""A stored record as reads hand it out (``store.ResourceStore.present``)."""


def as_stored(record: interface.Record) -> interface.Record:
    """A resource without fields computed when read: its records as stored."""
    return record


@dataclasses.dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str
    """ADDED, MODIFIED, DELETED, BOOKMARK or ERROR; or PROGRESS, never sent: the storage
    promised nothing at or below ``revision`` is still to come (the next bookmark may say so)."""
    record: interface.Record | None = None
    revision: int = 0
    status: dict[str, Any] | None = None
    """The Status of an ERROR event."""
    initial_events_end: bool = False


def matches(record: interface.Record, labels: selectors.LabelSelector,
            fields: selectors.FieldSelector, split_key: SplitKey) -> bool:
    """Selector match; names come from the key, so only a label selector decodes the value."""
    if not fields.empty and not fields.matches(*split_key(record.key)):
        return False
    return labels.empty or labels.matches(codec.labels(record))


async def stream(storage: interface.Store, prefix: str, opts: options.WatchOptions,
                 split_key: SplitKey, present: Present = as_stored) -> AsyncIterator[WatchEvent]:
    labels, fields = opts.label_selector, opts.field_selector
    initial = opts.send_initial_events
    if initial is None:
        initial = opts.resource_version in ("", "0")
    if initial and opts.resource_version not in ("", "0"):
        wanted = options.parse_revision(opts.resource_version)
        current = await storage.current_revision()
        if wanted > current:
            # The initial state must be at least as new as asked: an ERROR event at once, as
            # kube-apiserver sends (tests/data/kube-samples/resource-version-too-large.json)
            yield WatchEvent("ERROR", status=statuses.too_large(
                current, wanted, retry_after=1).body())
            return
    if initial:
        try:
            if opts.resource_version == "":
                page = await storage.list(prefix)  # consistent: read the backend
            else:  # "0" or NotOlderThan: the watch cache may answer
                page = await storage.list_recent(
                    prefix, not_older_than=options.parse_revision(opts.resource_version))
        except interface.StorageError as exc:
            yield WatchEvent("ERROR", status=statuses.from_storage(exc).body())
            return
        for record in page.records:
            if matches(record, labels, fields, split_key):
                yield WatchEvent("ADDED", present(record), record.revision)
        start = page.revision
        if opts.send_initial_events:
            yield WatchEvent("BOOKMARK", revision=start, initial_events_end=True)
    elif opts.resource_version in ("", "0"):
        start = await storage.current_revision()
    else:
        start = options.parse_revision(opts.resource_version)
    try:
        if opts.allow_bookmarks:  # progress marks move the bookmarks' resourceVersion on
            async for update in storage.updates(prefix, after=start):
                if isinstance(update, interface.Progress):
                    yield WatchEvent("PROGRESS", revision=update.revision)
                    continue
                translated = _translate(update, labels, fields, split_key, present)
                if translated is not None:
                    yield translated
        else:
            async for event in storage.watch(prefix, after=start):
                translated = _translate(event, labels, fields, split_key, present)
                if translated is not None:
                    yield translated
    except interface.StorageError as exc:
        # a compacted start names the revision the client asked for, not the storage's cursor
        yield WatchEvent("ERROR", status=statuses.from_storage(exc, requested=start).body())


def _translate(event: interface.Event, labels: selectors.LabelSelector,
               fields: selectors.FieldSelector, split_key: SplitKey,
               present: Present) -> WatchEvent | None:
    found = _matching(event, labels, fields, split_key)
    if found is None or found.record is None:
        return found
    return dataclasses.replace(found, record=present(found.record))


def _matching(event: interface.Event, labels: selectors.LabelSelector,
              fields: selectors.FieldSelector, split_key: SplitKey) -> WatchEvent | None:
    record = event.record
    if not fields.empty and not fields.matches(*split_key(record.key)):
        return None
    if event.type is interface.EventType.DELETE:
        if labels.empty or labels.matches(codec.labels(record)):
            return WatchEvent("DELETED", record, record.revision)
        return None
    if labels.empty:
        kind = "MODIFIED" if event.previous is not None else "ADDED"
        return WatchEvent(kind, record, record.revision)
    now_matches = labels.matches(codec.labels(record))
    previous = event.previous
    was = previous is not None and labels.matches(codec.labels(previous))
    if now_matches:
        return WatchEvent("MODIFIED" if was else "ADDED", record, record.revision)
    if was and previous is not None:
        # Upstream sends the last matching content, at the event's revision.
        return WatchEvent("DELETED", dataclasses.replace(previous, revision=record.revision),
                          record.revision)
    return None
