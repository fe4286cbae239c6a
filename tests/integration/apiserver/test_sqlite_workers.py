"""``python -m apiserver --standalone --processes 2`` on the default SQLite store: two server
processes on one socket and one file, each answering reads from its own memory. ``--workers``,
the flag's old name, still works and is reported once.

Pausing one worker (SIGSTOP) makes the other serve every new connection, so each check below
knows which process answered: a write acknowledged by one is what the other returns at once, a
watch served by one sees the other's writes in order, one of them runs the controllers, a
crashed worker comes back with everything, and so does the whole server after a restart.
The controllers stay off there: a worker stopped in the middle of a write transaction (its
Lease renewal) would hold SQLite's write lock, and every other worker's writes would wait for
it. The controllers' own test runs them and stops nobody.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx

from devkit.harness import apiserver as support
from devkit.harness import processes
from tests.support import kubeclient

NS = "workers"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"
_PATIENCE = 60.0


@contextlib.contextmanager
def only(server: support.RunningServer, worker: int) -> Iterator[httpx.Client]:
    """A new client whose connection goes to ``worker``: every other worker is paused while it
    connects and sends (its requests are answered before this returns)."""
    others = [pid for pid in processes.children(server.process.pid) if pid != worker]
    for pid in others:
        processes.pause(pid)
    try:
        with server.client() as client:
            yield client
    finally:
        for pid in others:
            processes.resume(pid)


def test_two_workers_on_one_sqlite_file(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    with support.running(data, extra_args=["--processes", "2"]) as server:
        a, b = processes.children(server.process.pid)
        assert len({a, b}) == 2
        # read-your-writes across the processes, both ways
        for writer, reader, name in ((a, b, "one"), (b, a, "two")):
            with only(server, writer) as on_writer:
                created = on_writer.post(COLLECTION, json=kubeclient.artifact(name, NS))
                assert created.status_code == 201, created.text
            rv = created.json()["metadata"]["resourceVersion"]
            with only(server, reader) as on_reader:
                got = on_reader.get(f"{COLLECTION}/{name}")
                assert got.status_code == 200
                assert got.json()["metadata"]["resourceVersion"] == rv
                listed = on_reader.get(COLLECTION).json()
                assert int(listed["metadata"]["resourceVersion"]) >= int(rv)
                assert name in [item["metadata"]["name"] for item in listed["items"]]
        # a watch served by b sees a's writes, in order (b is paused only while a is written to
        # alone; its watch stream carries on once it runs again)
        with server.client() as client:
            start = client.get(COLLECTION).json()["metadata"]["resourceVersion"]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            opened = concurrent.futures.Future[None]()
            watching = pool.submit(_watch, server, b, start, 3, opened)
            opened.result(timeout=_PATIENCE)
            written = []
            with only(server, a) as on_a:
                for i in range(3):
                    body = on_a.post(COLLECTION, json=kubeclient.artifact(f"w{i}", NS)).json()
                    written.append(body["metadata"]["resourceVersion"])
            events = watching.result(timeout=_PATIENCE)
        assert [e["type"] for e in events] == ["ADDED"] * 3
        assert [e["object"]["metadata"]["resourceVersion"] for e in events] == written
        # a crashed worker is started again and serves what the other wrote meanwhile
        os.kill(a, signal.SIGKILL)
        with server.client() as client:
            assert client.post(COLLECTION, json=kubeclient.artifact("meanwhile", NS)
                               ).status_code == 201  # fmt: skip
        now = processes.replaced(server.process.pid, a, count=2, timeout=_PATIENCE)
        restarted = next(pid for pid in now if pid != b)
        _wait_ready(server, restarted)
        with only(server, restarted) as on_new:
            assert on_new.get(f"{COLLECTION}/meanwhile").status_code == 200
        server.stop()
        assert server.process.returncode == 0, server.log()
    assert "--workers is now --processes" not in server.log()
    # the whole server restarted on the same file, under the flag's old name
    with support.running(data, extra_args=["--workers", "2"]) as again, again.client() as client:
        names = [item["metadata"]["name"] for item in client.get(COLLECTION).json()["items"]]
        assert sorted(names) == ["meanwhile", "one", "two", "w0", "w1", "w2"]
        assert len(processes.children(again.process.pid)) == 2
        # one warning, from the supervisor, not one per server process
        assert again.log().count("--workers is now --processes") == 1, again.log()


def _wait_ready(server: support.RunningServer, worker: int) -> None:
    deadline = time.monotonic() + _PATIENCE
    while True:
        try:
            with only(server, worker) as client:
                if client.get("/readyz").status_code == 200:
                    return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.2)


def _watch(server: support.RunningServer, worker: int, start: str, count: int,
           opened: concurrent.futures.Future[None]) -> list[dict[str, Any]]:
    """The first ``count`` events of a watch whose connection ``worker`` serves."""
    others = [pid for pid in processes.children(server.process.pid) if pid != worker]
    for pid in others:  # paused until the watch's connection is ``worker``'s
        processes.pause(pid)
    with server.client() as client, client.stream(
        "GET", COLLECTION, params={"watch": "1", "timeoutSeconds": "30", "resourceVersion": start}
    ) as response:
        for pid in others:
            processes.resume(pid)
        assert response.status_code == 200
        opened.set_result(None)
        return support.watch_events(response, count)


def test_the_controllers_run_in_one_worker_and_move_when_it_dies(tmp_path: pathlib.Path) -> None:
    args = ["--processes", "2", "--controllers=embedded"]
    with support.running(tmp_path / "data", extra_args=args) as server:
        _wait_for_log(server, "acquired lease", 1)
        time.sleep(3)  # a few renewal rounds (2 s apart): the other worker stays a candidate
        assert server.log().count("acquired lease") == 1, server.log()
        # the leader among them, unknown which
        for worker in processes.children(server.process.pid):
            os.kill(worker, signal.SIGKILL)  # its Lease stays held until it expires
        # after the Lease's 15 s, a restarted worker takes it
        _wait_for_log(server, "acquired lease", 2, timeout=_PATIENCE)
        with server.client() as client:
            assert client.get("/readyz").status_code == 200
        server.stop()
        assert server.process.returncode == 0, server.log()


def _wait_for_log(server: support.RunningServer, text: str, count: int,
                  timeout: float = _PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while server.log().count(text) < count:
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.2)
