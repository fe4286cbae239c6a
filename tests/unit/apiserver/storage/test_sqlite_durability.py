"""kill -9 a writing process: every acknowledged write survives and revisions keep increasing."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import sys

from apiserver.storage import sqlite

_WRITER = pathlib.Path(__file__).with_name("durability_writer.py")
_ROOT = pathlib.Path(__file__).parents[4]
_PATIENCE = 60.0


async def write_then_kill(path: pathlib.Path, mode: str, acks: int) -> list[tuple[str, str, int]]:
    """Run the writer until it acknowledged ``acks`` writes, SIGKILL it, return what it acked."""
    env = dict(os.environ, PYTHONPATH=str(_ROOT))
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(_WRITER), str(path), mode, stdout=asyncio.subprocess.PIPE, env=env
    )
    acked: list[tuple[str, str, int]] = []
    try:
        assert child.stdout is not None
        assert await asyncio.wait_for(child.stdout.readline(), _PATIENCE) == b"ready\n"
        while len(acked) < acks:
            line = await asyncio.wait_for(child.stdout.readline(), _PATIENCE)
            assert line, "the writer exited on its own"
            op, key, revision = line.decode().split()
            acked.append((op, key, int(revision)))
    finally:
        if child.returncode is None:
            child.send_signal(signal.SIGKILL)
        await child.wait()
    assert child.returncode == -signal.SIGKILL
    return acked


def check_value(key: str, value: bytes) -> None:
    """A torn write would not parse, or would carry another key's body."""
    assert json.loads(value)["key"] == key


async def test_acknowledged_creates_survive_kill(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.db"
    acked = await write_then_kill(path, "create", 150)
    store = sqlite.Store(path)
    await store.start()
    try:
        for _, key, revision in acked:
            record = await store.get(key)
            assert record is not None, key
            assert record.revision == revision
            check_value(key, record.value)
        newest = acked[-1][2]
        assert await store.current_revision() >= newest
        page = await store.list("/d/")
        # Writes in flight at the kill may have landed too, whole, and nothing else.
        # A fresh store is at revision 1, so the first write is revision 2.
        assert [r.revision for r in page.records] == list(range(2, len(page.records) + 2))
        for record in page.records:
            check_value(record.key, record.value)
        after = await store.create("/after", b"{}")
        assert after.revision > max(newest, await store.oldest_revision())
    finally:
        await store.close()


async def test_revisions_stay_monotonic_across_kills_during_compaction(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "s.db"
    newest = 0
    for _ in range(3):
        acked = await write_then_kill(path, "churn", 120)
        assert acked[0][2] > newest, "a revision was reused after a restart"
        newest = acked[-1][2]
        last_op = {key: (op, revision) for op, key, revision in acked}
        store = sqlite.Store(path, history=5)
        await store.start()
        try:
            assert await store.current_revision() >= newest
            assert 0 < await store.oldest_revision() <= await store.current_revision()
            for key, (op, revision) in last_op.items():
                record = await store.get(key)
                if record is not None:
                    check_value(key, record.value)
                    # At most the in-flight write of this key may have landed after the ack.
                    assert record.revision >= revision or op == "del"
                elif op == "put":
                    # Only an unacknowledged delete in flight can explain an absent key.
                    assert await store.current_revision() > revision
        finally:
            await store.close()
