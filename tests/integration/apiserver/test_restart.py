"""Durability across restarts: objects, resourceVersions, watch resume; kill -9 mid-writes."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from devkit.harness import apiserver as support
from tests.support import kubeclient
from tests.support.kubeclient import GROUP, VERSION

NS = "restart"
PLURAL = "modelartifacts"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/{PLURAL}"


@pytest.fixture
def restartable(fresh_apiserver: support.RunningServer) -> Iterator[list[support.RunningServer]]:
    """The servers started on one data directory; every one is stopped at the end."""
    servers = [fresh_apiserver]
    try:
        yield servers
    finally:
        for server in servers:
            server.kill()


def _restart(servers: list[support.RunningServer], *, crash: bool = False) -> support.RunningServer:
    old = servers[-1]
    if crash:
        old.kill()
    else:
        old.stop()
        assert old.process.returncode == 0, old.log()
    new = support.start(old.data_dir, port=old.port)
    servers.append(new)
    assert new.admin_token == old.admin_token  # the kubeconfig in use stays valid
    return new


def test_objects_revisions_and_watch_survive_a_restart(
    restartable: list[support.RunningServer],
) -> None:
    server = restartable[0]
    api = kubeclient.custom_objects(server.kubeconfig)
    try:
        before = {}
        for name in ("a", "b", "c"):
            created = api.create_namespaced_custom_object(
                GROUP, VERSION, NS, PLURAL, kubeclient.artifact(name, NS)
            )
            before[name] = created["metadata"]["resourceVersion"]
        listed = api.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)
        list_rv = listed["metadata"]["resourceVersion"]
        api.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, "b", {"metadata": {"labels": {"after": "list"}}}
        )
    finally:
        api.api_client.close()

    server = _restart(restartable)
    api = kubeclient.custom_objects(server.kubeconfig)
    try:
        for name in ("a", "c"):
            got = api.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
            assert got["metadata"]["resourceVersion"] == before[name]
        # a watch from a revision taken before the restart resumes exactly after it
        api.create_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, kubeclient.artifact("d", NS)
        )
        events = kubeclient.events(api, NS, list_rv, count=2)
        seen = [(t, o["metadata"]["name"]) for t, o in events]
        assert seen == [("MODIFIED", "b"), ("ADDED", "d")]
        assert int(events[1][1]["metadata"]["resourceVersion"]) > int(list_rv)
        relisted = api.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)
        assert int(relisted["metadata"]["resourceVersion"]) >= int(
            events[1][1]["metadata"]["resourceVersion"]
        )
    finally:
        api.api_client.close()


def test_kill_9_mid_writes_keeps_every_acknowledged_write(
    restartable: list[support.RunningServer],
) -> None:
    server = restartable[0]
    acknowledged: dict[str, str] = {}
    stop = threading.Event()
    enough = threading.Event()

    def write(prefix: str) -> None:
        with server.client() as client:
            index = 0
            while not stop.is_set():
                body = kubeclient.artifact(f"{prefix}-{index:04d}", NS)
                try:
                    response = client.post(COLLECTION, json=body)
                except httpx.HTTPError:
                    return  # the server died under us: this write was never acknowledged
                if response.status_code == 201:
                    acknowledged[body["metadata"]["name"]] = response.json()["metadata"][
                        "resourceVersion"
                    ]
                if len(acknowledged) >= 40:
                    enough.set()
                index += 1

    writers = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(4)]
    for thread in writers:
        thread.start()
    try:
        assert enough.wait(30), "writes did not progress"
        server = _restart(restartable, crash=True)
    finally:
        stop.set()
        for thread in writers:
            thread.join(30)
    with server.client() as client:
        listed = client.get(COLLECTION).json()
    stored = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in listed["items"]}
    missing = set(acknowledged) - set(stored)
    assert not missing, f"acknowledged but lost: {sorted(missing)}"
    assert all(stored[name] == rv for name, rv in acknowledged.items())
    # revisions keep increasing after the crash
    with server.client() as client:
        created = client.post(COLLECTION, json=kubeclient.artifact("after-crash", NS)).json()
    assert int(created["metadata"]["resourceVersion"]) > max(int(rv) for rv in stored.values())

