"""Every file the standalone server writes is 0600 and its directory 0700, the SQLite store's WAL
and shared-memory files included (they exist while it runs)."""

from __future__ import annotations

import os
import pathlib
import stat

from devkit.harness import apiserver as support

HARNESS = {"server.log"}  # written by devkit/harness/apiserver.py, not by the server


def _modes(directory: pathlib.Path) -> dict[str, int]:
    return {path.name: stat.S_IMODE(path.stat().st_mode) for path in directory.iterdir()
            if path.name not in HARNESS}


def test_files_are_0600_while_running_and_after(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    previous = os.umask(0o022)  # the usual umask: files would be 0644 unless made otherwise
    try:
        with support.running(data) as server, server.client() as client:
            created = client.post(
                "/apis/worker.gpustack.ai/v1/namespaces/modes/modelartifacts",
                json={"metadata": {"name": "m"},
                      "spec": {"source": {"huggingFace": {"repository": "a/b"}}}})
            assert created.status_code == 201, created.text
            running = _modes(data)
        after = _modes(data)
    finally:
        os.umask(previous)
    assert {"store.db", "store.db-wal", "store.db-shm", "tokens.csv", "kubeconfig",
            "worker.kubeconfig", "ca.crt", "ca.key", "serving.crt", "serving.key"} <= set(running)
    assert {name: mode for name, mode in running.items() if mode != 0o600} == {}
    assert {name: mode for name, mode in after.items() if mode != 0o600} == {}
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
