"""Each input of issue 7, against the real server: a 4xx ``Status`` naming the field, never a 500,
and never accepted when Kubernetes would refuse it.

The first group answered 500 before; the second was accepted (and stored) before.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit.harness import apiserver as support

NS = "bad-input"
BASE = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"
SPEC = {"source": {"huggingFace": {"repository": "a/b"}}}


def _body(name: Any = "x", **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": name, **metadata}, "spec": SPEC}


@pytest.fixture(scope="module")
def client(apiserver: support.RunningServer) -> Iterator[httpx.Client]:
    with apiserver.client() as http:
        created = http.post(BASE, json=_body("labelled", labels={"a": "5"}))
        assert created.status_code == 201, created.text
        yield http
        # whatever was refused, nothing made the server fail
        assert "Traceback" not in apiserver.log()
        assert " 500 " not in apiserver.log()


def _status(response: httpx.Response, code: int, *names: str) -> dict[str, Any]:
    """A ``Status`` with ``code`` whose message (or a cause's field) names each of ``names``."""
    assert response.status_code == code, response.text[:2000]
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == code
    said = body["message"] + " ".join(
        cause.get("field", "") for cause in (body.get("details") or {}).get("causes", []))
    for name in names:
        assert name in said, body
    return body


def _created(client: httpx.Client, name: str) -> str:
    response = client.post(BASE, json=_body(name))
    assert response.status_code == 201, response.text
    return f"{BASE}/{name}"


# --- answered 500 before ---------------------------------------------------------------------

def test_a_label_selector_integer_of_5000_digits(client: httpx.Client) -> None:
    selector = "a>" + "9" * 5000
    listed = client.get(BASE, params={"labelSelector": selector})
    body = _status(listed, 400, "'>' operator")
    assert len(body["message"]) < 1000


def test_a_watch_with_that_selector_is_refused_before_its_200(client: httpx.Client) -> None:
    with client.stream("GET", BASE, params={"watch": "1", "labelSelector": "a<" + "9" * 5000,
                                            "timeoutSeconds": "5"}) as response:
        response.read()
    _status(response, 400, "'<' operator")


@pytest.mark.parametrize(("name", "value"), [
    ("limit", str(2**63)),
    ("limit", "1" + "0" * 400),
    ("timeoutSeconds", "9" * 400),
    ("limit", "\u0663"),
])
def test_integer_parameters_beyond_int64(client: httpx.Client, name: str, value: str) -> None:
    _status(client.get(BASE, params={name: value}), 400, f'"{name}"')
    _status(client.get(BASE, params={name: value, "watch": "1"}), 400, f'"{name}"')


@pytest.mark.parametrize(("field", "value"), [
    ("name", 5), ("name", ["a"]), ("name", {"a": "b"}), ("generateName", 5),
    ("generateName", ["web-"]),
])
def test_names_of_the_wrong_type(client: httpx.Client, field: str, value: Any) -> None:
    body = {**_body(), "metadata": {field: value}}
    _status(client.post(BASE, json=body), 422, f"metadata.{field}")


def test_json_nested_deeper_than_the_encoder_takes(client: httpx.Client) -> None:
    for depth in (300, 1100):  # past orjson's encoder (255), past its decoder (1024)
        text = json.dumps(_body("deep", annotations={"a": "PLACEHOLDER"})).replace(
            '"PLACEHOLDER"', "[" * depth + "]" * depth)
        response = client.post(BASE, content=text, headers={"Content-Type": "application/json"})
        _status(response, 400, "nested more than 64 levels")
    text = json.dumps(_body("deep", annotations={"a": "PLACEHOLDER"})).replace(
        '"PLACEHOLDER"', "[" * 300 + "]" * 300)
    _status(client.post(BASE, content=text, headers={"Content-Type": "application/json"}), 400,
            "metadata.annotations.a")


def test_yaml_nested_10000_deep(client: httpx.Client) -> None:
    text = ("metadata:\n  name: deep\n  annotations:\n    a: " + "[" * 10_000 + "]" * 10_000
            + "\nspec:\n  source:\n    huggingFace:\n      repository: a/b\n")
    response = client.post(BASE, content=text, headers={"Content-Type": "application/yaml"})
    _status(response, 400, "line 4")
    block = "metadata:\n  name: deep\n  labels:\n" + "".join(
        "  " * (i + 2) + f"k{i}:\n" for i in range(200)) + "  " * 202 + "v\n"
    response = client.post(BASE, content=block, headers={"Content-Type": "application/yaml"})
    _status(response, 400, "nested more than 64 levels")


@pytest.mark.parametrize(("op", "field"), [
    ({"op": "add", "path": "metadata/labels", "value": {}}, "path"),
    ({"op": "add", "path": 5, "value": {}}, "path"),
    ({"op": "copy", "from": "metadata", "path": "/x"}, "from"),
    ({"op": "jump", "path": "/x"}, "op"),
    ({"op": "add", "path": "/x"}, "value"),
    ("add", "operation 0"),
])
def test_malformed_json_patch_operations(client: httpx.Client, op: Any, field: str) -> None:
    url = _created(client, f"patch-{abs(hash(json.dumps(op))) % 10**8}")
    response = client.patch(url, content=json.dumps([op]),
                            headers={"Content-Type": "application/json-patch+json"})
    _status(response, 400, field, "operation 0")


@pytest.mark.parametrize("version", [5, ["5"], {"v": "5"}])
def test_a_resource_version_of_the_wrong_type_in_a_put(client: httpx.Client,
                                                       version: Any) -> None:
    url = _created(client, f"put-{type(version).__name__}")
    current = client.get(url).json()
    current["metadata"]["resourceVersion"] = version
    _status(client.put(url, json=current), 422, "metadata.resourceVersion")


@pytest.mark.parametrize(("options", "field"), [
    ({"dryRun": "All"}, "dryRun"), ({"dryRun": 5}, "dryRun"), ({"dryRun": [5]}, "dryRun[0]"),
    ({"orphanDependents": "yes"}, "orphanDependents"),
    ({"gracePeriodSeconds": "abc"}, "gracePeriodSeconds"),
    ({"preconditions": "x"}, "preconditions"),
    ({"preconditions": {"uid": 5}}, "preconditions.uid"),
    ({"propagationPolicy": ["Orphan"]}, "propagationPolicy"),
])
def test_delete_options_of_the_wrong_type(client: httpx.Client, options: dict[str, Any],
                                          field: str) -> None:
    url = _created(client, f"delete-{field.replace('[', '').replace(']', '').lower()}-"
                           f"{type(next(iter(options.values()))).__name__}")
    response = client.request("DELETE", url, json={"kind": "DeleteOptions", "apiVersion": "v1",
                                                   **options})
    _status(response, 422, field)
    assert client.get(url).status_code == 200  # not deleted


# --- accepted before -------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "field"), [
    (5, "metadata.annotations[a]"), (True, "metadata.annotations[a]"),
    ({"b": "c"}, "metadata.annotations[a]"), (None, "metadata.annotations[a]"),
])
def test_annotation_values_that_are_not_strings(client: httpx.Client, value: Any,
                                                field: str) -> None:
    _status(client.post(BASE, json=_body("annotated", annotations={"a": value})), 422, field)
    assert client.get(f"{BASE}/annotated").status_code == 404


@pytest.mark.parametrize(("owners", "field"), [
    ("x", "metadata.ownerReferences"),
    ([1, 2], "metadata.ownerReferences[0]"),
    ([{"apiVersion": "v1", "kind": "Node", "name": "n"}], "metadata.ownerReferences[0].uid"),
    ([{"apiVersion": "v1", "kind": "Node", "name": "", "uid": "u"}],
     "metadata.ownerReferences[0].name"),
])
def test_owner_references_that_are_not_owner_references(client: httpx.Client, owners: Any,
                                                        field: str) -> None:
    _status(client.post(BASE, json=_body("owned", ownerReferences=owners)), 422, field)
    assert client.get(f"{BASE}/owned").status_code == 404


def test_a_grace_period_that_is_not_an_integer(client: httpx.Client) -> None:
    url = _created(client, "graceful")
    _status(client.delete(url, params={"gracePeriodSeconds": "abc"}), 400, "gracePeriodSeconds")
    assert client.get(url).status_code == 200  # not deleted
    assert client.delete(url, params={"gracePeriodSeconds": "0"}).status_code == 200


@pytest.mark.parametrize("revision", [True, "5", 1.5, None, 2**63, -1, [5]])
def test_a_continue_token_whose_revision_is_not_an_integer(client: httpx.Client,
                                                           revision: Any) -> None:
    token = base64.urlsafe_b64encode(json.dumps(
        {"v": "worker.gpustack.ai/v1", "rv": revision, "start": f"/modelartifacts/{NS}/a"}
    ).encode()).decode().rstrip("=")
    _status(client.get(BASE, params={"limit": "1", "continue": token}), 400, "continue")


@pytest.mark.parametrize("version", ["\u0661", "\uff15", "1\u0661", "\u00b2"])
def test_resource_versions_in_other_digits(client: httpx.Client, version: str) -> None:
    _status(client.get(f"{BASE}/labelled", params={"resourceVersion": version}), 400,
            "resourceVersion")
    _status(client.get(BASE, params={"resourceVersion": version}), 400, "resourceVersion")
    _status(client.get(BASE, params={"resourceVersion": version, "watch": "1"}), 400,
            "resourceVersion")


def test_a_json_patch_that_replaces_metadata_with_a_string(client: httpx.Client) -> None:
    url = _created(client, "unmetadata")
    ops = [{"op": "replace", "path": "/metadata", "value": "x"}]
    response = client.patch(url, content=json.dumps(ops),
                            headers={"Content-Type": "application/json-patch+json"})
    _status(response, 422, "metadata")
    assert client.get(url).json()["metadata"]["name"] == "unmetadata"


@pytest.mark.parametrize(("patch", "field"), [
    ({"kind": "Other"}, "kind"), ({"apiVersion": "v1"}, "API version"),
    ({"kind": ["ModelArtifact"]}, "kind"),
])
def test_a_merge_patch_that_changes_the_kind(client: httpx.Client, patch: dict[str, Any],
                                             field: str) -> None:
    url = _created(client, f"kind-{abs(hash(json.dumps(patch))) % 10**8}")
    response = client.patch(url, json=patch,
                            headers={"Content-Type": "application/merge-patch+json"})
    _status(response, 400, field)
    assert client.get(url).json()["kind"] == "ModelArtifact"


def test_json_patch_that_changes_the_kind(client: httpx.Client) -> None:
    url = _created(client, "kind-json-patch")
    ops = [{"op": "replace", "path": "/kind", "value": "NodeModelStore"}]
    response = client.patch(url, content=json.dumps(ops),
                            headers={"Content-Type": "application/json-patch+json"})
    _status(response, 400, "kind")
