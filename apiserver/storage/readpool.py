"""The SQLite store's reader threads: each holds its own read-only connection, which in WAL mode
reads a snapshot without waiting for the writer (reads of an older revision, history, watch
replays and the ``--processes`` catch-up; current reads come from memory)."""

from __future__ import annotations

import asyncio
import pathlib
import sqlite3
import threading
from collections.abc import Callable
from concurrent import futures
from typing import TypeVar

from apiserver.storage import interface, logtable

_T = TypeVar("_T")


class ReadPool:
    """``count`` threads reading ``path``; a connection is opened on a thread's first read."""

    def __init__(self, path: pathlib.Path, count: int) -> None:
        self._path = path
        self._pool = futures.ThreadPoolExecutor(count, thread_name_prefix="sqlite-reader")
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    async def run(self, job: Callable[[sqlite3.Connection], _T]) -> _T:
        """``job`` on a reader thread's connection; sqlite3 errors become ``StorageError``."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._run, job)

    def close(self) -> None:
        """Wait for the reads in flight, then close every connection (blocking)."""
        self._pool.shutdown(wait=True)
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()

    def _run(self, job: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if conn is None:
                conn = logtable.connect(self._path, writer=False)
                self._local.conn = conn
                with self._lock:
                    self._conns.append(conn)
            return job(conn)
        except sqlite3.Error as exc:
            raise interface.StorageError(f"sqlite read failed: {exc}") from exc
