"""The status body from the node's facts: entries by state, the 256 cap (referenced first, then
the most recently used, the rest counted), digest order, and the conditions."""

from __future__ import annotations

import datetime

from nodeplugin.cache import usage
from nodeplugin.materialize import failures as failure_records
from nodeplugin.materialize import interface
from nodeplugin.nodestore import status as statuses

NOW = datetime.datetime(2026, 3, 1, 12, 30, tzinfo=datetime.UTC)


def _d(i: int) -> str:
    return "sha256:" + f"{i:064x}"


def _facts(**changes: object) -> statuses.Facts:
    values: dict[str, object] = dict(
        published=[], sizes={}, running=[], failures=[], quarantined={}, referenced=frozenset(),
        usage={}, total_bytes=1000, used_bytes=423, stored_bytes=300,
    )
    values.update(changes)
    return statuses.Facts(**values)  # type: ignore[arg-type]


def test_each_state_reads_from_its_source() -> None:
    hour = NOW.replace(minute=0)
    failure = failure_records.Failure(_d(3), interface.Reason.ACCESS_DENIED,
                              "the hub refused the credential (HTTP 401)", 2, NOW,
                              NOW + datetime.timedelta(minutes=2))
    facts = _facts(
        published=[_d(1), _d(5)], sizes={_d(1): 123},
        running=[interface.Progress(_d(2), interface.State.DOWNLOADING, 40, 100)],
        failures=[failure],
        # _d(4)'s tree is held apart; _d(5) was materialized again beside its held copy
        quarantined={_d(4): "a published file's hash no longer matches its manifest",
                     _d(5): "a published file's hash no longer matches its manifest"},
        referenced=frozenset({_d(1), _d(4)}),
        usage={_d(1): usage.Usage(hour, True), _d(2): usage.Usage(hour, False)},
    )
    listed, left_out = statuses.models(facts)
    assert left_out == 0
    assert [m["digest"] for m in listed] == [_d(1), _d(2), _d(3), _d(4), _d(5)]
    ready, downloading, failed, quarantined, again = listed
    assert (again["state"], again["referenced"]) == ("Ready", False) and "reason" not in again
    assert ready == {"digest": _d(1), "state": "Ready", "referenced": True, "sizeBytes": 123,
                     "lastUsedTime": "2026-03-01T12:00:00Z"}
    assert downloading == {"digest": _d(2), "state": "Downloading", "referenced": False,
                           "downloadedBytes": 40, "sizeBytes": 100, "source": "Hub",
                           "lastUsedTime": "2026-03-01T12:00:00Z"}
    assert failed["state"] == "Failed" and failed["reason"] == "AccessDenied"
    assert failed["retryTime"] == "2026-03-01T12:32:00Z" and "HTTP 401" in failed["message"]
    assert quarantined["state"] == "Failed" and quarantined["reason"] == "IntegrityMismatch"
    assert "removed once no Pod mounts it" in quarantined["message"]
    assert "the next mount materializes it again" in quarantined["message"]
    assert quarantined["referenced"] is True  # a running Pod still mounts the held copy
    body = statuses.body(facts, observed_generation=3, conditions=[], listed=listed)
    assert body["capacity"] == {"totalBytes": 1000, "storedBytes": 300, "usedPercent": 40}
    assert body["observedGeneration"] == 3


def test_used_percent_rounds_down_to_five() -> None:
    assert [statuses.used_percent(u, 1000) for u in (0, 49, 50, 999, 1000)] == [0, 0, 5, 95, 100]
    assert statuses.used_percent(5, 0) == 0


def test_more_than_256_entries_keep_the_referenced_then_the_most_recent() -> None:
    published = [_d(i) for i in range(300)]
    referenced = frozenset(_d(i) for i in range(10))  # the oldest ones, but mounted
    records = {d: usage.Usage(NOW - datetime.timedelta(hours=300 - i), d in referenced)
               for i, d in enumerate(published)}
    listed, left_out = statuses.models(_facts(published=published, referenced=referenced,
                                              usage=records))
    assert len(listed) == statuses.MAX_MODELS and left_out == 44
    kept = {m["digest"] for m in listed}
    assert referenced <= kept
    assert kept - referenced == {_d(i) for i in range(54, 300)}  # the 246 most recent
    assert [m["digest"] for m in listed] == sorted(kept)


def test_progress_fields_are_set_apart() -> None:
    listed, _ = statuses.models(_facts(
        published=[_d(1)],
        running=[interface.Progress(_d(2), interface.State.DOWNLOADING, 40, 100)]))
    body = statuses.body(_facts(), observed_generation=1, conditions=[], listed=listed)
    moved = dict(body, models=[dict(m) for m in body["models"]],
                 capacity=dict(body["capacity"], storedBytes=999))
    moved["models"][1]["downloadedBytes"] = 90
    assert statuses.without_progress(moved) == statuses.without_progress(body)
    assert statuses.progress_of(moved) == {_d(2): (90, 100)}
    # Without a running download, storedBytes is an ordinary field.
    idle = statuses.body(_facts(), observed_generation=1, conditions=[],
                         listed=statuses.models(_facts(published=[_d(1)]))[0])
    changed = dict(idle, capacity=dict(idle["capacity"], storedBytes=1))
    assert statuses.without_progress(changed) != statuses.without_progress(idle)
