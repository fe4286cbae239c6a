"""Page-cache advice: writeback started and synced pages dropped, the file's bytes unchanged."""

from __future__ import annotations

import os
import pathlib

from nodeplugin.materialize import pagecache


def test_advice_changes_nothing_but_the_cache(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "f"
    data = os.urandom(3 << 20)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, data, 0)
        pagecache.start_writeback(fd, 0, len(data))
        pagecache.start_writeback(fd, 0, 0)  # nothing to do
        os.fsync(fd)
        pagecache.drop(fd, 0, len(data))
        pagecache.drop(fd, 0, 0)
    finally:
        os.close(fd)
    assert path.read_bytes() == data
    assert pagecache._sync_file_range() is not None  # Linux with glibc: the call is there
