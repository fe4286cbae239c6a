"""A group of writes checked and inserted at once: each write sees the ones before it (and the
log's newest rows), and a refused write takes no revision and fails alone."""

from __future__ import annotations

import pathlib
import sqlite3
from collections.abc import Iterator

import pytest

from apiserver.storage import interface, logtable, logwrites

_GROUP = [
    logwrites.Write("/g/a", b"a1"),
    logwrites.Write("/g/a", b"again"),  # refused: created just before, in the same group
    logwrites.Write("/g/b", b"b1"),
    logwrites.Write("/g/a", b"a2", expected=2),  # the revision the first write took
    logwrites.Write("/g/b", b"stale", expected=1),  # refused: a conflict
    logwrites.Write("/g/b", b"", expected=3, delete=True),
    logwrites.Write("/g/b", b"b2"),  # created again after its deletion
    logwrites.Write("/g/none", b"", expected=9, delete=True),  # refused: not found
]


@pytest.fixture
def conn(tmp_path: pathlib.Path) -> Iterator[sqlite3.Connection]:
    conn = logtable.connect(tmp_path / "s.db", writer=True)
    yield conn
    conn.close()


def test_each_write_of_a_group_sees_the_ones_before_it_and_fails_alone(
    conn: sqlite3.Connection,
) -> None:
    with logtable.transaction(conn, write=True):
        outcomes = logwrites.apply(conn, _GROUP)
    refused = {i: type(o) for i, o in enumerate(outcomes) if not isinstance(o, interface.Event)}
    assert refused == {1: interface.KeyExists, 4: interface.RevisionConflict,
                       7: interface.KeyNotFound}  # fmt: skip
    events = [o for o in outcomes if isinstance(o, interface.Event)]
    put, delete = interface.EventType.PUT, interface.EventType.DELETE
    assert [e.type for e in events] == [put, put, put, delete, put]
    assert [e.record.revision for e in events] == [2, 3, 4, 5, 6]  # refusals take none
    assert events[0].previous is None and events[0].record.create_revision == 2
    assert events[2].previous == events[0].record and events[2].record.value == b"a2"
    assert events[3].previous == events[1].record
    assert events[3].record.value == b"b1"  # a deletion carries the last value
    assert events[4].record.create_revision == 6 and events[4].previous is None
    assert logtable.get(conn, "/g/a") == events[2].record
    assert logtable.get(conn, "/g/b") == events[4].record
    assert logtable.current(conn) == 6
    assert logtable.events(conn, "/g/", after=1, upto=6) == events  # as the log replays them


def test_a_group_reads_the_newest_rows_of_its_keys_from_the_log(
    conn: sqlite3.Connection,
) -> None:
    with logtable.transaction(conn, write=True):
        first = logwrites.apply(conn, [logwrites.Write(k, b"1") for k in ("/g/a", "/g/b")])
    a, b = (o for o in first if isinstance(o, interface.Event))
    with logtable.transaction(conn, write=True):
        outcomes = logwrites.apply(conn, [
            logwrites.Write("/g/a", b"2", expected=a.record.revision),
            logwrites.Write("/g/b", b"", expected=b.record.revision, delete=True),
            logwrites.Write("/g/a", b"again"),
        ])  # fmt: skip
    assert isinstance(outcomes[0], interface.Event) and outcomes[0].previous == a.record
    assert isinstance(outcomes[1], interface.Event) and outcomes[1].previous == b.record
    assert isinstance(outcomes[2], interface.KeyExists)
    assert logtable.get(conn, "/g/b") is None
