"""The writes of the SQLite revision log: compare-and-swap, a group checked and inserted at once,
and compaction (the schema and the reads are in ``logtable``).

Everything here is synchronous and runs on the store's writer thread. ``apply`` is what the group
commit runs (``groupcommit``): inside the writer's open transaction, with SQLite's write lock
held, it reads the newest row of every key the group touches in one query, checks each write's
precondition in order against those rows (a write sees the writes before it in the group), and
inserts the accepted rows with one statement. A refused write takes no revision and leaves its
neighbours alone, as a savepoint per write would, but the writer thread runs five statements per
group instead of five per write, and so crosses the GIL a few times per group: on two busy cores
each crossing can wait for the event loop to let go of it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence

from apiserver.storage import interface, logtable

# Within (compacted, upto], find keys written there; of all their rows at or below ``upto``, drop
# every deletion and every row superseded by a newer one at or below ``upto``. Rows of other keys
# at or below the old mark are already the newest live row of their key and stay.
_COMPACT = """
DELETE FROM log WHERE id IN (
    SELECT o.id FROM log AS o
    WHERE o.key IN (SELECT key FROM log WHERE id > :compacted AND id <= :upto)
      AND o.id <= :upto
      AND (o.deleted = 1 OR o.id < (
          SELECT max(m.id) FROM log AS m WHERE m.key = o.key AND m.id <= :upto))
)
"""

# The newest row of each of a set of keys (the (key, id, deleted) index answers both parts).
_NEWEST_OF = """
SELECT l.key, l.id, l.value, l.create_revision, l.deleted FROM log AS l
WHERE l.key IN ({keys}) AND l.id = (SELECT max(m.id) FROM log AS m WHERE m.key = l.key)
"""

_INSERT = "INSERT INTO log (id, key, value, create_revision, prev_revision, deleted) VALUES "


@dataclasses.dataclass(frozen=True, slots=True)
class Write:
    """One write of a group: a create (``expected`` None), or an update or a delete of the
    revision ``expected``."""

    key: str
    value: bytes
    expected: int | None = None
    delete: bool = False


Outcome = interface.Event | Exception
"""A write's event, or why it was refused (``KeyExists``, ``KeyNotFound``,
``RevisionConflict``)."""


@dataclasses.dataclass(slots=True)
class _Row:
    revision: int
    value: bytes
    create_revision: int
    deleted: bool


def apply(conn: sqlite3.Connection, writes: Sequence[Write]) -> list[Outcome]:
    """Run ``writes`` in order inside the open write transaction; one outcome per write.

    Raises ``sqlite3.Error`` having written nothing (SQLite undoes the failed statement), so the
    transaction holds none of the group; a collision on the unique index cannot happen here, as
    the rows read are the newest under SQLite's write lock.
    """
    keys = list(dict.fromkeys(write.key for write in writes))
    rows = {
        key: _Row(revision, value, created, bool(deleted))
        for key, revision, value, created, deleted in conn.execute(
            _NEWEST_OF.format(keys=", ".join("?" * len(keys))), keys
        )
    }
    revision = logtable.current(conn)
    outcomes: list[Outcome] = []
    inserts: list[object] = []
    for write in writes:
        row = rows.get(write.key)
        outcome = _check(write, row if row is not None and not row.deleted else None)
        if isinstance(outcome, Exception):
            outcomes.append(outcome)
            continue
        revision += 1
        previous = outcome
        if previous is None:
            created, prev, value = revision, (row.revision if row is not None else 0), write.value
        else:
            created, prev = previous.create_revision, previous.revision
            # The deletion row keeps the last value so DELETE events (also replayed ones) carry it.
            value = previous.value if write.delete else write.value
        inserts += (revision, write.key, value, created, prev, int(write.delete))
        rows[write.key] = _Row(revision, value, created, write.delete)
        record = interface.Record(
            key=write.key, value=value, revision=revision, create_revision=created
        )
        kind = interface.EventType.DELETE if write.delete else interface.EventType.PUT
        outcomes.append(interface.Event(type=kind, record=record, previous=previous))
    if inserts:
        conn.execute(_INSERT + ", ".join(["(?, ?, ?, ?, ?, ?)"] * (len(inserts) // 6)), inserts)
    return outcomes


def _check(write: Write, live: _Row | None) -> interface.Record | Exception | None:
    """The record ``write`` replaces (None for a create), or why it is refused."""
    if write.expected is None:
        return interface.KeyExists(write.key) if live is not None else None
    if live is None:
        return interface.KeyNotFound(write.key)
    if live.revision != write.expected:
        return interface.RevisionConflict(write.key, write.expected, live.revision)
    return interface.Record(
        key=write.key, value=live.value, revision=live.revision,
        create_revision=live.create_revision,
    )  # fmt: skip


def fence(conn: sqlite3.Connection, revision: int) -> int:
    """``interface.Store.fence`` in one transaction: the history up to now compacted away, the
    AUTOINCREMENT counter (the next revision) and the compaction mark raised to ``revision``
    (or left at the current revision when that is newer). No row is written: nothing shows in a
    list or a watch. Returns the store's revision after it."""
    with logtable.transaction(conn, write=True):
        current = logtable.current(conn)
        mark = logtable.compacted(conn)
        target = max(current, revision)
        if current > mark:
            conn.execute(_COMPACT, {"compacted": mark, "upto": current})
        conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'log'", (target,))
        conn.execute("UPDATE meta SET value = ? WHERE name = 'compacted'", (target,))
    return target


def compact_step(conn: sqlite3.Connection, target: int, step: int) -> int:
    """Compact at most ``step`` revisions towards ``target``; returns the new compaction mark."""
    with logtable.transaction(conn, write=True):
        mark = logtable.compacted(conn)
        upto = min(target, mark + step, logtable.current(conn))
        if upto <= mark:
            return mark
        conn.execute(_COMPACT, {"compacted": mark, "upto": upto})
        conn.execute("UPDATE meta SET value = ? WHERE name = 'compacted'", (upto,))
    return upto
