"""The live records of a keyspace, in memory, ordered by key: what a GET or a LIST reads.

Held by the watch cache's windows (``window.Window``, fed by a backend watch) and by the SQLite
store itself (``sqlite.Store``, fed by its own commits before they are acknowledged). Keys sort by
code point, which is the order SQLite (UTF-8 bytes) and etcd (bytes) list them in.
Not thread-safe: every caller runs on the event loop.
"""

from __future__ import annotations

import bisect

from apiserver.storage import interface, keyrange


class Live:
    def __init__(self, records: list[interface.Record] | None = None) -> None:
        self.state: dict[str, interface.Record] = {r.key: r for r in records or ()}
        self.keys: list[str] = sorted(self.state)
        """``state``'s keys, sorted."""

    def __len__(self) -> int:
        return len(self.state)

    def get(self, key: str) -> interface.Record | None:
        return self.state.get(key)

    def apply(self, event: interface.Event) -> None:
        record = event.record
        if event.type is interface.EventType.DELETE:
            if self.state.pop(record.key, None) is not None:
                del self.keys[bisect.bisect_left(self.keys, record.key)]
            return
        if record.key not in self.state:
            bisect.insort(self.keys, record.key)
        self.state[record.key] = record

    def page(self, prefix: str, revision: int, *, start_after: str = "",
             limit: int = 0) -> interface.Page:
        """Records under ``prefix`` sorting after ``start_after``, at most ``limit`` (0: all),
        as a page read at ``revision`` (the caller's: the state is the keyspace as of it)."""
        low = prefix
        start = bisect.bisect_left(self.keys, low)
        if start_after and start_after >= prefix:
            start = bisect.bisect_right(self.keys, start_after, lo=start)
        bound = keyrange.prefix_end(prefix)
        end = len(self.keys) if bound is None else bisect.bisect_left(self.keys, bound, lo=start)
        count = max(0, end - start)
        more = bool(limit) and count > limit
        if more:
            end = start + limit
        records = [self.state[key] for key in self.keys[start:end]]
        return interface.Page(records, revision, more, count - limit if more else 0)
