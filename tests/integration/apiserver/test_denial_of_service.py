"""The attacks of issue 7, against the real server: each answers 4xx with a small Status, in
bounded time (the client's timeout is the failure guard), and the server's peak RSS stays
bounded (``VmHWM`` of the server process, read after every attack).

Before the fix, the YAML alias bomb held the event loop for 12-100 s and grew the process past
2 GiB, and the JSON patch of 142 KiB answered a 100 MB error at a 634 MB peak.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit.harness import apiserver as support

NS = "dos"
BASE = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"
PEAK_BOUND = 256 * 2**20
"""Far above what bounded handling needs (~60-100 MiB), far below what the attacks took."""
SMALL = 64 * 1024
"""No answer to an attack may be larger than this."""
TIMEOUT = 120.0
"""Only a guard against a hang: a bounded answer takes well under a second."""
HEADER = ("apiVersion: worker.gpustack.ai/v1\nkind: ModelArtifact\n")
SOURCE = "spec:\n  source:\n    huggingFace:\n      repository: a/b\n"


@pytest.fixture(scope="module")
def server(apiserver: support.RunningServer) -> support.RunningServer:
    return apiserver


@pytest.fixture(scope="module")
def client(server: support.RunningServer) -> Iterator[httpx.Client]:
    with server.client() as http:
        http.timeout = httpx.Timeout(TIMEOUT)
        yield http


def _laughs(indent: str, levels: int = 9) -> str:
    """Anchors ``l0``..``l<levels>``, each a list of nine aliases of the one before: ~400 bytes
    that expand to 9**levels strings."""
    lines = [f'{indent}l0: &l0 "lollollollollol"']
    lines += [f"{indent}l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _refused(response: httpx.Response, code: int, server: support.RunningServer) -> Any:
    assert response.status_code == code, response.text[:2000]
    assert len(response.content) < SMALL
    assert sum(len(k) + len(v) for k, v in response.headers.items()) < SMALL
    body = response.json()
    assert body["kind"] == "Status" and body["code"] == code
    assert server.peak_rss() < PEAK_BOUND
    return body


def _post_yaml(client: httpx.Client, text: str) -> httpx.Response:
    return client.post(BASE, content=text, headers={"Content-Type": "application/yaml"})


def test_an_alias_bomb_in_annotations_is_refused_before_it_expands(
        client: httpx.Client, server: support.RunningServer) -> None:
    text = (HEADER + "metadata:\n  name: laughs\n  annotations:\n" + _laughs("    ")
            + SOURCE)
    assert len(text) < 700
    body = _refused(_post_yaml(client, text), 413, server)
    assert "aliases expanded" in body["message"]


@pytest.mark.parametrize("where", ["labels", "finalizers", "allowPatterns"])
def test_an_alias_bomb_anywhere_is_refused(client: httpx.Client, server: support.RunningServer,
                                           where: str) -> None:
    anchors = "x-anchors:\n" + _laughs("  ")
    if where == "allowPatterns":
        text = HEADER + anchors + "metadata:\n  name: laughs\n" + SOURCE + "  allowPatterns: *l9\n"
    else:
        text = HEADER + anchors + f"metadata:\n  name: laughs\n  {where}: *l9\n" + SOURCE
    _refused(_post_yaml(client, text), 413, server)


def test_a_recursive_alias_is_refused(client: httpx.Client, server: support.RunningServer) -> None:
    text = HEADER + "metadata:\n  name: loop\n  labels: &self {a: *self}\n" + SOURCE
    _refused(_post_yaml(client, text), 400, server)


def test_deep_yaml_and_json_are_refused(client: httpx.Client,
                                        server: support.RunningServer) -> None:
    deep_yaml = HEADER + "metadata:\n  name: deep\n  annotations:\n    a: " + \
        "[" * 10_000 + "]" * 10_000 + "\n" + SOURCE
    _refused(_post_yaml(client, deep_yaml), 400, server)
    for depth in (600, 2_000):  # under and over orjson's own limit of 1024
        deep = ('{"metadata":{"name":"deep","annotations":{"a":' + "[" * depth + "]" * depth
                + '}},"spec":{"source":{"huggingFace":{"repository":"a/b"}}}}')
        body = _refused(client.post(BASE, content=deep,
                                    headers={"Content-Type": "application/json"}), 400, server)
        assert "deep" in body["message"]


@pytest.fixture(scope="module")
def target(client: httpx.Client) -> str:
    created = client.post(BASE, json={"metadata": {"name": "target"},
                                      "spec": {"source": {"huggingFace": {"repository": "a/b"}}}})
    assert created.status_code == 201, created.text
    return f"{BASE}/target"


def _json_patch(client: httpx.Client, url: str, ops: list[dict[str, Any]]) -> httpx.Response:
    return client.patch(url, content=json.dumps(ops),
                        headers={"Content-Type": "application/json-patch+json"})


def _copies(value_size: int, copies: int) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": "/metadata/finalizers", "value": ["x" * value_size]}]
    ops += [{"op": "copy", "from": "/metadata/finalizers/0", "path": "/metadata/finalizers/-"}
            ] * copies
    return ops


def test_a_copying_json_patch_is_bounded(client: httpx.Client, server: support.RunningServer,
                                         target: str) -> None:
    small = _copies(100 * 1024, 500)  # 142 KiB: an invalid 100 KiB finalizer and 500 copies
    assert len(json.dumps(small)) < 150 * 1024
    body = _refused(_json_patch(client, target, small), 413, server)
    assert "copy" in body["message"]
    large = _copies(100 * 1024, 9_000)  # ~750 KiB
    _refused(_json_patch(client, target, large), 413, server)
    too_many = [{"op": "test", "path": "/kind", "value": "ModelArtifact"}] * 10_001
    body = _refused(_json_patch(client, target, too_many), 413, server)
    assert "10000" in body["message"]


def test_a_patch_whose_result_is_too_large_is_refused_before_validation(
        client: httpx.Client, server: support.RunningServer, target: str) -> None:
    grow = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "x" * (1600 * 1024)}},
            {"op": "copy", "from": "/metadata/annotations/a", "path": "/metadata/annotations/b"}]
    body = _refused(_json_patch(client, target, grow), 413, server)
    assert "patched object" in body["message"]
    # the stored object is unchanged
    assert "annotations" not in client.get(target).json()["metadata"]


def test_many_invalid_fields_answer_a_bounded_status(client: httpx.Client,
                                                     server: support.RunningServer) -> None:
    annotations = {f"k{i}": i for i in range(100_000)}  # non-string values, ~1.5 MB
    response = client.post(BASE, json={"metadata": {"name": "many", "annotations": annotations},
                                       "spec": {"source": {"huggingFace": {"repository": "a/b"}}}})
    body = _refused(response, 422, server)
    assert len(body["details"]["causes"]) == 100
    assert body["details"]["causes"][-1]["message"].endswith("more errors, not listed")


def test_long_values_are_cut_in_messages(client: httpx.Client, server: support.RunningServer,
                                         target: str) -> None:
    finalizer = "f" * (200 * 1024) + "/x/y"
    response = client.patch(target, json={"metadata": {"finalizers": [finalizer]}},
                            headers={"Content-Type": "application/merge-patch+json"})
    body = _refused(response, 422, server)
    assert body["details"]["causes"][0]["field"] == "metadata.finalizers[0]"
    assert "cut" in body["message"]


def test_many_unknown_fields_answer_bounded_warnings(client: httpx.Client,
                                                     server: support.RunningServer) -> None:
    junk = {f"field-{i}-" + "u" * 200: 1 for i in range(10_000)}  # ~2.2 MB of unknown fields
    spec = {"source": {"huggingFace": {"repository": "a/b"}}, **junk}
    response = client.post(BASE, json={"metadata": {"name": "junk"}, "spec": spec})
    assert response.status_code == 201, response.text[:500]
    warnings = response.headers.get_list("warning")
    assert 1 < len(warnings) <= 64
    assert sum(len(w) for w in warnings) < SMALL
    strict = client.post(BASE, params={"fieldValidation": "Strict"},
                         json={"metadata": {"name": "junk2"}, "spec": spec})
    _refused(strict, 400, server)


def test_the_server_still_serves(client: httpx.Client, server: support.RunningServer) -> None:
    assert client.get("/readyz").status_code == 200
    assert client.get(BASE).status_code == 200
    assert server.peak_rss() < PEAK_BOUND
    assert "Traceback" not in server.log()
