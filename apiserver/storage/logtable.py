"""The SQL of the SQLite revision log: schema, connections, transactions and reads at a revision
(the writes are in ``logwrites``).

Everything here is synchronous and runs on the store's own threads, never on the event loop.
One table ``log`` holds every write; its row id IS the revision (AUTOINCREMENT, so a revision is
never reused, even after compaction removed the newest row). A row records the key, the value, the
revision that created the key, the previous row of the key and whether it is a deletion; the
current state is the newest row per key unless that row is a deletion. A unique index on
``(key, prev_revision)`` makes two writes based on the same previous row collide.

A new log starts at revision 1, as etcd does: the schema sets the AUTOINCREMENT counter
(``sqlite_sequence``) to 1 without writing a row, so no list or watch ever sees a marker, and a
list of an empty store answers a real revision that a later watch can start after ("0" would mean
"any state" to a Kubernetes client).
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import sqlite3
from collections.abc import Iterator

from apiserver.storage import interface
from apiserver.storage.keyrange import prefix_end

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    deleted INTEGER NOT NULL CHECK (deleted IN (0, 1))
);
CREATE UNIQUE INDEX IF NOT EXISTS log_key_prev ON log (key, prev_revision);
CREATE INDEX IF NOT EXISTS log_key_id ON log (key, id, deleted);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (name, value) VALUES ('compacted', 0);
INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', 1);
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'log', 1 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'log');
"""

SCHEMA_VERSION = 1

# The live rows as of a revision: a key's newest row at or below it, unless that is a deletion.
# Written as NOT EXISTS (not GROUP BY) so SQLite walks the (key, id, deleted) index in key order
# and stops at LIMIT instead of sorting the whole range for every page.
_LIVE_AT = """
FROM log AS l
WHERE {lower} AND {upper} AND l.id <= :revision AND l.deleted = 0
  AND NOT EXISTS (
      SELECT 1 FROM log AS n WHERE n.key = l.key AND n.id > l.id AND n.id <= :revision)
"""

_STATE_AT = "SELECT l.key, l.value, l.id, l.create_revision " + _LIVE_AT + " ORDER BY l.key"

_COUNT_AT = "SELECT count(*) " + _LIVE_AT

_EVENTS = """
SELECT l.id, l.key, l.value, l.create_revision, l.prev_revision, l.deleted, p.value
FROM log AS l LEFT JOIN log AS p ON p.id = l.prev_revision AND p.deleted = 0
WHERE l.id > :after AND l.id <= :upto AND {lower} AND {upper}
ORDER BY l.id
"""


def connect(path: pathlib.Path, *, writer: bool) -> sqlite3.Connection:
    """Open a connection in autocommit mode; transactions are explicit (see ``transaction``)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    if writer:
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a commit is on disk (WAL fsynced) before the write is acknowledged.
        conn.execute("PRAGMA synchronous = FULL")
        conn.executescript(_SCHEMA)
        version = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()[0]
        if version != SCHEMA_VERSION:
            conn.close()
            raise interface.StorageError(
                f"{path}: storage schema {version}, this server reads {SCHEMA_VERSION}"
            )
    else:
        conn.execute("PRAGMA query_only = 1")
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    """A read snapshot (deferred) or a write lock taken up front (immediate).

    Inside an open transaction (the group commit, see ``groupcommit``) this is a
    savepoint instead: a failure undoes only its own changes and the outer transaction goes on.
    """
    if conn.in_transaction:
        conn.execute("SAVEPOINT one")
        try:
            yield
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled the whole transaction back
                conn.execute("ROLLBACK TO one")
                conn.execute("RELEASE one")
            raise
        conn.execute("RELEASE one")
        return
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # SQLite may already have rolled back on its own (e.g. after an I/O error).
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def current(conn: sqlite3.Connection) -> int:
    """The newest revision ever handed out (survives compaction of the row itself); at least 1."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'log'").fetchone()
    return int(row[0]) if row else 0


def compacted(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE name = 'compacted'").fetchone()
    return int(row[0])


def get(conn: sqlite3.Connection, key: str) -> interface.Record | None:
    row = _newest(conn, key)
    if row is None or row[4]:
        return None
    return interface.Record(key=key, value=row[1], revision=row[0], create_revision=row[2])


def list_at(
    conn: sqlite3.Connection, prefix: str, revision: int, start_after: str, limit: int
) -> interface.Page:
    with transaction(conn, write=False):
        newest = current(conn)
        if revision == 0:
            revision = newest
        _check_readable(conn, revision, newest)
        lower, upper, params = _key_range(prefix, start_after, column="l.key")
        params["revision"] = revision
        sql = _STATE_AT.format(lower=lower, upper=upper)
        if limit > 0:
            sql += " LIMIT :limit"
            params["limit"] = limit + 1
        rows = conn.execute(sql, params).fetchall()
        more = limit > 0 and len(rows) > limit
        remaining = 0
        if more:
            rows = rows[:limit]
            lower, upper, params = _key_range(prefix, rows[-1][0], column="l.key")
            params["revision"] = revision
            sql = _COUNT_AT.format(lower=lower, upper=upper)
            remaining = int(conn.execute(sql, params).fetchone()[0])
    records = [
        interface.Record(key=k, value=v, revision=rev, create_revision=created)
        for k, v, rev, created in rows
    ]
    return interface.Page(records=records, revision=revision, more=more, remaining=remaining)


def events(conn: sqlite3.Connection, prefix: str, after: int, upto: int) -> list[interface.Event]:
    """Events of keys under ``prefix`` with ``after < revision <= upto``, in revision order.

    Compacted when history after ``after`` is no longer complete.
    """
    with transaction(conn, write=False):
        oldest = compacted(conn)
        if after < oldest:
            raise interface.Compacted(after, oldest)
        lower, upper, params = _key_range(prefix, "", column="l.key")
        params.update(after=after, upto=upto)
        rows = conn.execute(_EVENTS.format(lower=lower, upper=upper), params).fetchall()
    out: list[interface.Event] = []
    for revision, key, value, created, prev, deleted, prev_value in rows:
        previous = None
        if prev_value is not None:
            previous = interface.Record(
                key=key, value=prev_value, revision=prev, create_revision=created
            )
        record = interface.Record(key=key, value=value, revision=revision, create_revision=created)
        kind = interface.EventType.DELETE if deleted else interface.EventType.PUT
        out.append(interface.Event(type=kind, record=record, previous=previous))
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Tail:
    """Everything committed after a revision, read in one snapshot (``tail``)."""

    current: int
    """The newest committed revision in that snapshot."""
    compacted: int
    events: list[interface.Event]
    """Every event after the revision asked for, up to ``current``, in revision order."""
    state: list[interface.Record] | None
    """Instead of ``events`` when some of them are compacted: every live record at
    ``current``."""


def tail(conn: sqlite3.Connection, after: int) -> Tail:
    """What other processes on the same file committed after ``after`` (``--processes``); in the
    writer's open transaction, what is committed under its lock."""
    with transaction(conn, write=False):
        newest = current(conn)
        oldest = compacted(conn)
        if after >= newest:
            return Tail(newest, oldest, [], None)
        if after < oldest:
            return Tail(newest, oldest, [], list_at(conn, "", newest, "", 0).records)
        return Tail(newest, oldest, events(conn, "", after, newest), None)


def _check_readable(conn: sqlite3.Connection, revision: int, newest: int) -> None:
    if revision > newest:
        raise interface.FutureRevision(revision, newest)
    oldest = compacted(conn)
    if revision < oldest:
        raise interface.Compacted(revision, oldest)


def _newest(conn: sqlite3.Connection, key: str) -> tuple[int, bytes, int, int, int] | None:
    """(id, value, create_revision, prev_revision, deleted) of the key's newest row."""
    row = conn.execute(
        "SELECT id, value, create_revision, prev_revision, deleted FROM log"
        " WHERE key = ? ORDER BY id DESC LIMIT 1",
        (key,),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2], row[3], row[4])


def _key_range(prefix: str, start_after: str, *, column: str) -> tuple[str, str, dict[str, object]]:
    """SQL bounds on ``column`` selecting keys under ``prefix`` that sort after ``start_after``.

    Ranges rather than LIKE/substr so SQLite walks the (key, id) index.
    """
    params: dict[str, object] = {}
    if start_after and start_after >= prefix:
        lower = f"{column} > :lower"
        params["lower"] = start_after
    else:
        lower = f"{column} >= :lower"
        params["lower"] = prefix
    end = prefix_end(prefix)
    if end is None:
        upper = "1"
    else:
        upper = f"{column} < :upper"
        params["upper"] = end
    return lower, upper, params
