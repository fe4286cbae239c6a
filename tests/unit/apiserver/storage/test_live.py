"""The in-memory live records: ordering, paging by prefix and continuation, deletes."""

from __future__ import annotations

import pytest

from apiserver.storage import interface, live


def _put(key: str, revision: int) -> interface.Event:
    record = interface.Record(key=key, value=key.encode(), revision=revision,
                              create_revision=revision)
    return interface.Event(type=interface.EventType.PUT, record=record, previous=None)


def _delete(key: str, revision: int) -> interface.Event:
    record = interface.Record(key=key, value=b"", revision=revision, create_revision=1)
    return interface.Event(type=interface.EventType.DELETE, record=record, previous=None)


@pytest.fixture
def records() -> live.Live:
    state = live.Live()
    for number, key in enumerate(["/b/2", "/a/1", "/b/1", "/ab/1", "/b/3", "/c/\u00e9"], 1):
        state.apply(_put(key, number))
    return state


def test_pages_are_ordered_by_key_within_the_prefix(records: live.Live) -> None:
    page = records.page("/b/", 9)
    assert [r.key for r in page.records] == ["/b/1", "/b/2", "/b/3"]
    assert (page.revision, page.more, page.remaining) == (9, False, 0)
    assert [r.key for r in records.page("/a", 9).records] == ["/a/1", "/ab/1"]
    assert [r.key for r in records.page("", 9).records][-1] == "/c/\u00e9"


def test_limit_and_continuation(records: live.Live) -> None:
    first = records.page("/b/", 9, limit=2)
    assert [r.key for r in first.records] == ["/b/1", "/b/2"]
    assert (first.more, first.remaining) == (True, 1)
    rest = records.page("/b/", 9, start_after="/b/2", limit=2)
    assert [r.key for r in rest.records] == ["/b/3"] and not rest.more
    # a continuation key before the prefix starts at the prefix
    assert len(records.page("/b/", 9, start_after="/a").records) == 3
    assert records.page("/b/", 9, start_after="/b/3").records == []


def test_updates_replace_and_deletes_remove(records: live.Live) -> None:
    records.apply(_put("/b/2", 10))
    got = records.get("/b/2")
    assert got is not None and got.revision == 10
    records.apply(_delete("/b/2", 11))
    records.apply(_delete("/never", 12))  # deleting what is not there changes nothing
    assert records.get("/b/2") is None
    assert [r.key for r in records.page("/b/", 12).records] == ["/b/1", "/b/3"]
    assert len(records) == 5 and records.keys == sorted(records.keys)
