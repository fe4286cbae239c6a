"""Key ranges shared by the backends: the end of a prefix's range, in code points."""

from __future__ import annotations


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (None: no bound).

    SQLite compares TEXT as UTF-8 bytes, and etcd compares bytes, both ordering like Python's
    code-point comparison (the watch cache's sorted keys).
    """
    while prefix:
        last = ord(prefix[-1])
        if last < 0x10FFFF:
            bumped = last + 1
            if 0xD800 <= bumped <= 0xDFFF:
                bumped = 0xE000  # surrogates cannot be encoded; skip past them
            return prefix[:-1] + chr(bumped)
        prefix = prefix[:-1]
    return None
