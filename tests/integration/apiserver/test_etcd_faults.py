"""The API server on an etcd the test kills (-9), restarts and hangs (SIGSTOP): nothing
acknowledged is lost, requests during the outage answer a Status in bounded time, /readyz says
etcd is down, and open watches resume (or end with 410 so the client relists)."""

from __future__ import annotations

import concurrent.futures
import json
import pathlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit.harness import apiserver as support
from devkit.harness import etcd
from tests.support import kubeclient

NS = "faults"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"
REQUEST_TIMEOUT = 2.0
"""--etcd-request-timeout of the server under test."""
GUARD = 60.0
"""Client-side bound: far above the server's own timeouts, so a hang fails the test."""


@pytest.fixture
def member(tmp_path: pathlib.Path) -> Iterator[etcd.Etcd]:
    with etcd.running(tmp_path / "etcd") as running:
        try:
            yield running
        finally:
            running.resume()


@pytest.fixture
def server(member: etcd.Etcd, tmp_path: pathlib.Path) -> Iterator[support.RunningServer]:
    args = support.etcd_args(member.url, "--etcd-request-timeout", f"{REQUEST_TIMEOUT:g}s",
                             "--etcd-healthcheck-timeout", "1s")  # fmt: skip
    with support.running(tmp_path / "apiserver", extra_args=args) as running:
        yield running


def client(server: support.RunningServer) -> httpx.Client:
    c = server.client()
    c.timeout = httpx.Timeout(GUARD)
    return c


def ready(server: support.RunningServer) -> str:
    with client(server) as c:
        return c.get("/readyz", params={"verbose": "1"}).text


def wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def assert_status(response: httpx.Response) -> None:
    assert response.status_code in (500, 504), response.text
    body = response.json()
    assert body["kind"] == "Status" and body["code"] == response.status_code


def test_kill_9_mid_writes_loses_nothing_acknowledged(
    server: support.RunningServer, member: etcd.Etcd
) -> None:
    acked: dict[str, str] = {}  # name -> uid, for every 201
    refused: list[httpx.Response] = []
    lock = threading.Lock()
    stop = threading.Event()
    killed = threading.Event()
    failed_after_kill: set[int] = set()

    def writer(number: int) -> None:
        with client(server) as c:
            index = 0
            while not stop.is_set():
                name = f"w{number}-{index}"
                index += 1
                try:
                    response = c.post(COLLECTION, json=kubeclient.artifact(name, NS))
                except httpx.TransportError:
                    continue  # no answer at all would show up as a missing ack, never a pass
                with lock:
                    if response.status_code == 201:
                        acked[name] = response.json()["metadata"]["uid"]
                    else:
                        refused.append(response)
                        if killed.is_set():
                            failed_after_kill.add(number)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        writers = [pool.submit(writer, n) for n in range(4)]
        wait_for(lambda: len(acked) >= 20, "writes before the crash")
        member.kill()
        killed.set()
        wait_for(lambda: len(failed_after_kill) == 4, "every writer to see the outage")
        assert "[-]etcd failed" in ready(server)
        count = len(acked)
        member.start()
        wait_for(lambda: len(acked) >= count + 20, "writes after the restart")
        stop.set()
        for done in writers:
            done.result(timeout=GUARD)
    assert refused, "the outage refused nothing"
    for response in refused:
        assert_status(response)
    assert "[+]etcd ok" in ready(server)
    with client(server) as c:
        stored = {item["metadata"]["name"]: item["metadata"]["uid"]
                  for item in c.get(COLLECTION).json()["items"]}  # fmt: skip
    missing = {name for name in acked if stored.get(name) != acked[name]}
    assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"


def test_a_watch_survives_an_etcd_restart(
    server: support.RunningServer, member: etcd.Etcd
) -> None:
    with client(server) as c:
        start = c.post(COLLECTION, json=kubeclient.artifact("before", NS)).json()
        rv = start["metadata"]["resourceVersion"]
        events: list[dict[str, Any]] = []
        with c.stream("GET", COLLECTION, params={"watch": "1", "resourceVersion": rv,
                                                  "timeoutSeconds": "120"}) as stream:
            lines = stream.iter_lines()
            member.kill()
            member.start()
            wait_for(lambda: "[+]etcd ok" in ready(server), "etcd back")
            with client(server) as writer:
                assert writer.post(COLLECTION, json=kubeclient.artifact("after", NS)).is_success
            for line in lines:
                if line:
                    events.append(json.loads(line))
                    break
    # resumed: the event written after the restart; or told to relist
    event = events[0]
    if event["type"] == "ERROR":
        assert event["object"]["code"] == 410
    else:
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "after")


def test_a_hung_etcd_answers_504_within_the_request_timeout(
    server: support.RunningServer, member: etcd.Etcd
) -> None:
    with client(server) as c:
        created = c.post(COLLECTION, json=kubeclient.artifact("hang", NS))
        assert created.status_code == 201
        # the watch cache has it once a NotOlderThan list at its resourceVersion answers
        assert c.get(COLLECTION, params={
            "resourceVersion": created.json()["metadata"]["resourceVersion"],
            "resourceVersionMatch": "NotOlderThan"}).status_code == 200
        member.pause()
        try:
            got = c.get(f"{COLLECTION}/hang")
            assert got.status_code == 504
            assert_status(got)
            assert got.headers.get("retry-after") == "1"
            written = c.post(COLLECTION, json=kubeclient.artifact("during", NS))
            assert written.status_code == 504
            assert "[-]etcd failed" in ready(server)
            # a list that accepts a recent state is still answered, from the watch cache
            cached = c.get(COLLECTION, params={"resourceVersion": "0"})
            assert cached.status_code == 200
            assert "hang" in [item["metadata"]["name"] for item in cached.json()["items"]]
        finally:
            member.resume()
        wait_for(lambda: "[+]etcd ok" in ready(server), "etcd back")
        assert c.get(f"{COLLECTION}/hang").status_code == 200


def test_a_member_whose_port_was_taken_starts_on_new_ports(tmp_path: pathlib.Path) -> None:
    """The test harness itself: a first start whose chosen port another process bound
    meanwhile (as happened in CI) tries new ports; a restart keeps the ports it served on."""
    member = etcd.Etcd(tmp_path / "etcd")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", member.client_port))
        taken.listen()
        occupied = member.client_port
        try:
            member.start()
            assert member.client_port != occupied
            assert "address already in use" in member.log()
            serving = member.client_port
            member.kill()
            member.start()
            assert member.client_port == serving and member.healthy()
        finally:
            member.kill()
