"""Where the store's keys live in etcd: ``<prefix><key>`` (keys start with ``/``), as bytes.

``/gpustack`` + ``/modelartifacts/ns/name`` is ``/gpustack/modelartifacts/ns/name``. Every data
key sorts inside ``[<prefix>/, <prefix>0)``; the few keys of the server's own (``#`` sorts before
``/``) stay outside every list and watch.
"""

from __future__ import annotations


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` (etcd's rule)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"  # every key


class Keys:
    def __init__(self, prefix: str) -> None:
        root = prefix.rstrip("/")
        if not root.startswith("/") or "#" in root:
            raise ValueError(f"etcd prefix {prefix!r} must start with '/' and have no '#'")
        self.root = root
        self._root = root.encode()
        self.health = self._root + b"#health"
        """A key never written: reading it proves etcd serves linearizable reads."""
        self.compaction = self._root + b"#compact_rev_key"
        """The compactor's coordination key (its version counts compactions)."""
        self.fence = self._root + b"#fence"
        """Written (empty) to raise etcd's revision above a mark (``Store.fence``)."""

    def full(self, key: str) -> bytes:
        if not key.startswith("/"):
            raise ValueError(f"storage keys start with '/': {key[:100]!r}")
        return self._root + key.encode()

    def short(self, full: bytes) -> str:
        return full[len(self._root):].decode()

    def range(self, prefix: str, start_after: str) -> tuple[bytes, bytes]:
        """``[low, end)`` of the keys under ``prefix`` that sort after ``start_after``."""
        if prefix and not prefix.startswith("/"):
            # no key can match; an empty range right after the health key
            return self.health, self.health
        low = self._root + (prefix.encode() if prefix else b"/")
        end = prefix_end(low)
        if start_after and start_after >= prefix:
            low = max(low, self.full(start_after) + b"\0")
        return low, end
