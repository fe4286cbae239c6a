"""Several ``python -m apiserver`` processes on one etcd serve one consistent API; ``--processes``.

Every replica is a real standalone server process on its own port; they share one data directory
(one CA, one serving certificate, one token file) and one etcd member owned by the module.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devkit.harness import apiserver as support
from devkit.harness import etcd, processes
from tests.support import kubeclient, kubectl

NS = "replicas"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[etcd.Etcd]:
    with etcd.running(tmp_path_factory.mktemp("etcd")) as running:
        yield running


@pytest.fixture(scope="module")
def replicas(
    member: etcd.Etcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[support.RunningServer, support.RunningServer]]:
    shared = tmp_path_factory.mktemp("shared")
    args = support.etcd_args(member.url)
    with (
        support.running(shared, extra_args=args, log_name="a.log") as a,
        support.running(shared, extra_args=args, log_name="b.log") as b,
    ):
        yield a, b


def watch_lines(server: support.RunningServer, params: dict[str, str],
                count: int) -> list[dict[str, Any]]:
    """The first ``count`` watch events (the stream is bounded by timeoutSeconds)."""
    with server.client() as client, client.stream(
        "GET", COLLECTION, params={"watch": "1", "timeoutSeconds": "30", **params}
    ) as response:
        assert response.status_code == 200
        return support.watch_events(response, count)


def test_replicas_share_credentials_and_storage(
    replicas: tuple[support.RunningServer, support.RunningServer],
) -> None:
    a, b = replicas
    assert (a.admin_token, a.ca_file) == (b.admin_token, b.ca_file)
    with a.client() as on_a, b.client() as on_b:
        created = on_a.post(COLLECTION, json=kubeclient.artifact("shared", NS))
        assert created.status_code == 201, created.text
        rv = created.json()["metadata"]["resourceVersion"]
        got = on_b.get(f"{COLLECTION}/shared")
        assert got.status_code == 200
        assert got.json()["metadata"]["resourceVersion"] == rv
        assert got.json()["metadata"]["uid"] == created.json()["metadata"]["uid"]
        # a consistent list on either replica is at least as new as the write
        for client in (on_a, on_b):
            listed = client.get(COLLECTION).json()
            assert int(listed["metadata"]["resourceVersion"]) >= int(rv)
            assert "shared" in [item["metadata"]["name"] for item in listed["items"]]
        # NotOlderThan a revision the other replica handed out: B's cache waits for it
        recent = on_b.get(COLLECTION, params={"resourceVersion": rv,
                                              "resourceVersionMatch": "NotOlderThan"})
        assert recent.status_code == 200
        assert "shared" in [item["metadata"]["name"] for item in recent.json()["items"]]


def test_a_write_on_one_replica_reaches_a_watch_on_the_other(
    replicas: tuple[support.RunningServer, support.RunningServer],
) -> None:
    a, b = replicas
    with a.client() as on_a:
        start = on_a.get(COLLECTION).json()["metadata"]["resourceVersion"]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            watching = pool.submit(watch_lines, b, {"resourceVersion": start}, 2)
            created = on_a.post(COLLECTION, json=kubeclient.artifact("seen", NS)).json()
            patched = on_a.patch(
                f"{COLLECTION}/seen", content=b'{"metadata":{"labels":{"x":"1"}}}',
                headers={"Content-Type": "application/merge-patch+json"},
            ).json()  # fmt: skip
            events = watching.result(timeout=60)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]
    assert [e["object"]["metadata"]["resourceVersion"] for e in events] == [
        created["metadata"]["resourceVersion"], patched["metadata"]["resourceVersion"]]


def test_a_watch_resumes_on_the_other_replica(
    replicas: tuple[support.RunningServer, support.RunningServer],
) -> None:
    a, b = replicas
    with a.client() as on_a:
        first = on_a.post(COLLECTION, json=kubeclient.artifact("resume-1", NS)).json()
        rv = first["metadata"]["resourceVersion"]
        later = [on_a.post(COLLECTION, json=kubeclient.artifact(f"resume-{i}", NS)).json()
                 for i in (2, 3)]  # fmt: skip
    # a client that saw resume-1 on A reconnects to B from A's resourceVersion
    events = watch_lines(b, {"resourceVersion": rv}, 2)
    assert [e["object"]["metadata"]["name"] for e in events] == ["resume-2", "resume-3"]
    assert [e["object"]["metadata"]["resourceVersion"] for e in events] == [
        obj["metadata"]["resourceVersion"] for obj in later]


def test_a_create_race_across_replicas_has_one_winner(
    replicas: tuple[support.RunningServer, support.RunningServer],
) -> None:
    def create(server: support.RunningServer) -> int:
        with server.client() as client:
            return client.post(COLLECTION, json=kubeclient.artifact("race", NS)).status_code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(create, [replicas[i % 2] for i in range(16)]))
    assert sorted(codes) == [201] + [409] * 15


def test_readyz_names_the_etcd_check(
    replicas: tuple[support.RunningServer, support.RunningServer],
) -> None:
    for server in replicas:
        with server.client() as client:
            text = client.get("/readyz", params={"verbose": "1"}).text
        assert "[+]etcd ok" in text


def test_workers_share_one_socket_and_survive_a_crash(
    member: etcd.Etcd, tmp_path: pathlib.Path
) -> None:
    args = [*support.etcd_args(member.url), "--processes", "2"]
    with support.running(tmp_path / "workers", extra_args=args) as server:
        workers = processes.children(server.process.pid)
        assert len(workers) == 2
        with server.client() as client:
            created = client.post(COLLECTION, json=kubeclient.artifact("w", NS))
            assert created.status_code == 201
        # each worker alone serves new connections on the one socket, and sees the write
        for stopped in workers:
            processes.pause(stopped)
            try:
                with server.client() as fresh:
                    assert fresh.get(f"{COLLECTION}/w").status_code == 200
            finally:
                processes.resume(stopped)
        victim = workers[0]
        os.kill(victim, signal.SIGKILL)
        with server.client() as fresh:  # the survivor keeps serving meanwhile
            assert fresh.get(f"{COLLECTION}/w").status_code == 200
        # 60 s: a failure guard, the restart takes about a second
        processes.replaced(server.process.pid, victim, count=2, timeout=60)
        with server.client() as fresh:
            assert fresh.get(f"{COLLECTION}/w").status_code == 200
        server.stop()
        assert server.process.returncode == 0, server.log()


def test_kubectl_watch_on_one_replica_sees_applies_on_the_other(
    replicas: tuple[support.RunningServer, support.RunningServer], tmp_path: pathlib.Path
) -> None:
    a, b = replicas
    tool = kubectl.Kubectl(a.kubeconfig, tmp_path / "kube-cache")
    on_a, on_b = f"--server={a.url}", f"--server={b.url}"
    watching = tool.stream(on_b, "get", "modelartifacts", "-n", NS, "-w",
                           "--output-watch-events")  # fmt: skip
    try:
        tool.run(on_a, "apply", "-f", "-", stdin=json.dumps(kubeclient.artifact("kubectl", NS)))
        line = watching.wait_for("kubectl", timeout=60)
        assert line.split()[0] == "ADDED"
        tool.run(on_a, "delete", "modelartifact", "kubectl", "-n", NS)
        assert watching.wait_for("kubectl", timeout=60).split()[0] == "DELETED"
    finally:
        watching.close()
    shown = tool.run(on_b, "get", "modelartifacts", "-n", NS, "-o", "name").stdout
    assert "kubectl" not in shown


def test_compaction_by_the_replicas_answers_410_like_sqlite(tmp_path: pathlib.Path) -> None:
    with etcd.running(tmp_path / "etcd") as own:
        args = [*support.etcd_args(own.url)[:-2], "--etcd-compaction-interval", "300ms"]
        shared = tmp_path / "shared"
        with (
            support.running(shared, extra_args=args, log_name="a.log") as a,
            support.running(shared, extra_args=args, log_name="b.log") as b,
            a.client() as on_a, b.client() as on_b,
        ):
            first = on_a.post(COLLECTION, json=kubeclient.artifact("old-0", NS)).json()
            old_rv = first["metadata"]["resourceVersion"]
            on_a.post(COLLECTION, json=kubeclient.artifact("old-1", NS)).raise_for_status()
            page = on_b.get(COLLECTION, params={"limit": "1"}).json()
            token = page["metadata"]["continue"]
            deadline = time.monotonic() + 60  # a failure guard: rounds are 300 ms apart
            while True:
                # keep writing so each round has a newer revision to compact to
                on_a.patch(f"{COLLECTION}/old-0", content=b'{"metadata":{"labels":{"t":"%d"}}}'
                           % int(time.monotonic() * 1000),
                           headers={"Content-Type": "application/merge-patch+json"})
                gone = on_b.get(COLLECTION, params={"limit": "1", "continue": token})
                if gone.status_code == 410 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert gone.status_code == 410, gone.text
            assert gone.json()["reason"] == "Expired"
            assert "continue parameter is too old" in gone.json()["message"]
            # B's watch cache still holds those events (it began before them), like
            # kube-apiserver's: a watch from there is served, in order
            cached = watch_lines(b, {"resourceVersion": old_rv}, 1)
            assert (cached[0]["type"], cached[0]["object"]["metadata"]["name"]) == (
                "ADDED", "old-1")
            # a replica that started later has no such window: etcd answers, compacted
            with support.running(shared, extra_args=args, log_name="c.log") as c:
                events = watch_lines(c, {"resourceVersion": old_rv}, 1)
            assert events[0]["type"] == "ERROR"
            assert events[0]["object"]["code"] == 410
            assert "too old resource version" in events[0]["object"]["message"]
            assert "compacted etcd history" in a.log() + b.log()
