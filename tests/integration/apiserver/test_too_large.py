"""A list and a watch from a resourceVersion the server has not reached, over HTTPS from the real
server, answered as kube-apiserver 1.36 answers them (tests/data/kube-samples/
resource-version-too-large.json, compared field by field with only the numbers changed): the
status, the Status body (reason, message, causes, retryAfterSeconds), Retry-After, and for a
watch a silent 200 that sends what follows that version once the store passes it. The storage
contract suite holds every backend to the same answers."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from devkit.harness import apiserver as support
from tests.support import kubeclient, toolarge

NS = "too-large"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"


def _current(http: httpx.Client) -> int:
    return int(http.get(COLLECTION).json()["metadata"]["resourceVersion"])


def _refused_like(answer: httpx.Response, recorded: dict[str, Any], requested: int,
                  current: int) -> None:
    assert answer.status_code == recorded["status"] == 504
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers.get("retry-after") == toolarge.retry_after(recorded)
    assert answer.json() == toolarge.status(recorded, requested, current)


def test_lists_from_a_future_resource_version_answer_as_kube_apiserver(
        apiserver: support.RunningServer) -> None:
    with apiserver.client() as http:
        http.post(COLLECTION, json=kubeclient.artifact("one", NS)).raise_for_status()
        current = _current(http)
        future = current + 1000
        for case, params in (
                ("list", {"resourceVersion": future}),
                ("list-exact", {"resourceVersion": future, "resourceVersionMatch": "Exact"}),
                ("list-limit", {"resourceVersion": future, "limit": 1}),
                ("list-exact-limit", {"resourceVersion": future,
                                      "resourceVersionMatch": "Exact", "limit": 1})):
            answer = http.get(COLLECTION, params=params)
            _refused_like(answer, toolarge.CACHED[case], future, current)


def test_a_watch_from_a_future_resource_version_is_silent_until_the_store_passes_it(
        apiserver: support.RunningServer) -> None:
    with apiserver.client() as http:
        current = _current(http)
        quiet = http.get(COLLECTION, params={"watch": "1", "resourceVersion": current + 1000,
                                             "timeoutSeconds": "1"})
        recorded = toolarge.CACHED["watch"]
        assert quiet.status_code == recorded["status"] == 200
        assert quiet.headers["content-type"] == "application/json"
        assert quiet.text == "" and recorded["body"] == []

        after = _current(http) + 2
        names = [f"w{n}" for n in range(4)]

        def create_later() -> None:
            time.sleep(0.5)
            with apiserver.client() as writer:
                for name in names:
                    writer.post(COLLECTION, json=kubeclient.artifact(name, NS)).raise_for_status()

        writer = threading.Thread(target=create_later)
        writer.start()
        try:
            with http.stream("GET", COLLECTION, params={
                    "watch": "1", "resourceVersion": after, "timeoutSeconds": "30"}) as stream:
                events = support.watch_events(stream, 2)
        finally:
            writer.join()
        # only what happened after that version, as kube-apiserver sends (watch-then-writes)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "w2"), ("ADDED", "w3")]
        assert [e["type"] for e in toolarge.CACHED["watch-then-writes"]["body"]] == [
            "ADDED", "ADDED"]
        assert all(int(e["object"]["metadata"]["resourceVersion"]) > after for e in events)


def test_initial_events_from_a_future_resource_version_are_one_error_event(
        apiserver: support.RunningServer) -> None:
    with apiserver.client() as http:
        current = _current(http)
        future = current + 1000
        answer = http.get(COLLECTION, params={
            "watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
            "resourceVersion": future, "allowWatchBookmarks": "true", "timeoutSeconds": "5"})
        recorded = toolarge.UNCACHED["watch-initial-events"]
        assert answer.status_code == recorded["status"] == 200
        [event] = [json.loads(line) for line in answer.text.splitlines()]
        assert event["type"] == "ERROR"
        assert event["object"] == toolarge.status(recorded, future, current)
