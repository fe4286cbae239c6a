"""The resume ledger round-trips and reads torn or foreign files as empty."""

from __future__ import annotations

import pathlib

from nodeplugin.cache import layout
from nodeplugin.materialize import checkpoint

DIGEST = "sha256:" + "ab" * 32


def test_round_trip(tmp_path: pathlib.Path) -> None:
    ledger = checkpoint.Ledger(tmp_path, DIGEST)
    ledger.put("a/b.bin", checkpoint.FileCheckpoint(64, b"\x00\x01state"))
    ledger.put("c.txt", checkpoint.FileCheckpoint(5, None, verified=True))
    ledger.flush()
    assert (tmp_path / layout.RESUMABLE).exists()
    again = checkpoint.Ledger.load(tmp_path, DIGEST)
    assert again.get("a/b.bin") == checkpoint.FileCheckpoint(64, b"\x00\x01state")
    assert again.get("c.txt") == checkpoint.FileCheckpoint(5, None, verified=True)
    assert again.held_bytes() == 69
    again.keep_only({"c.txt"})
    assert again.get("a/b.bin") is None


def test_foreign_or_torn_ledgers_read_empty(tmp_path: pathlib.Path) -> None:
    ledger = checkpoint.Ledger(tmp_path, DIGEST)
    ledger.put("x", checkpoint.FileCheckpoint(1, None))
    ledger.flush()
    assert checkpoint.Ledger.load(tmp_path, "sha256:" + "cd" * 32).held_bytes() == 0
    (tmp_path / layout.RESUMABLE).write_bytes(b'{"version": 1, "digest"')
    assert checkpoint.Ledger.load(tmp_path, DIGEST).held_bytes() == 0
    (tmp_path / layout.RESUMABLE).write_bytes(b"")
    assert checkpoint.Ledger.load(tmp_path, DIGEST).held_bytes() == 0
