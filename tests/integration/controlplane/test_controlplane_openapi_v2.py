"""The fixture's ``/openapi/v2``: kube-apiserver's merged Swagger 2.0 document, each APIService
backend's paths under ``/apis/<group>/<version>/`` and the definitions they reach, fetched as
``system:aggregator``; equal definitions shared, clashing ones renamed ``_v2``; an ETag and 304;
the protobuf form relayed from the only backend (aggregator.md 5)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit.controlplane import ADMIN_TOKEN, Authority, ControlPlane, UserInfo, openapiv2
from devkit.harness.apiserver import free_port
from tests.integration.controlplane import backend

GROUP, VERSION = "example.gpustack.ai", "v1"
PREFIX = f"/apis/{GROUP}/{VERSION}"
PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTOBUF_BODY = b"\x0a\x032.0\x12\x07example"
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
WIDGET = "ai.gpustack.example.v1.Widget"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


def _spec(group: str = GROUP, kind: str = "Widget",
          meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """A backend's document: its group's paths, one path outside them, one unused definition."""
    definition = f"ai.gpustack.example.v1.{kind}"
    gvk = {"group": group, "version": VERSION, "kind": kind}
    return {
        "swagger": "2.0",
        "info": {"title": group, "version": VERSION},
        "paths": {
            f"/apis/{group}/{VERSION}/namespaces/{{namespace}}/{kind.lower()}s/{{name}}": {
                "get": {"x-kubernetes-group-version-kind": gvk,
                        "responses": {"200": {"schema": _ref(definition)}}},
            },
            "/version/": {"get": {"responses": {"200": {"schema": _ref("Unreached")}}}},
        },
        "definitions": {
            definition: {"type": "object", "x-kubernetes-group-version-kind": [gvk],
                         "properties": {"metadata": _ref(META)}},
            META: meta or {"type": "object", "properties": {"name": {"type": "string"}}},
            "Unreached": {"type": "string"},
            "Unused": {"type": "integer"},
        },
    }  # fmt: skip


def _routes(spec: dict[str, Any]) -> dict[str, backend.Route]:
    def openapi(seen: backend.Seen) -> backend.Answer:
        if seen.one("Accept") == PROTOBUF:
            return backend.Answer(200, PROTOBUF_BODY, "application/octet-stream")
        return backend.json_answer(spec)

    return {openapiv2.PATH: openapi}


@pytest.fixture
def widgets(control_plane: ControlPlane) -> Iterator[backend.Backend]:
    with backend.running(control_plane, GROUP, VERSION, _routes(_spec())) as running:
        yield running


def _client(cp: ControlPlane, token: str = ADMIN_TOKEN) -> httpx.Client:
    return httpx.Client(base_url=cp.url, verify=cp.trust(), timeout=30,
                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def test_the_document_is_kubes_with_the_backends_paths_and_reached_definitions(
    control_plane: ControlPlane, widgets: backend.Backend
) -> None:
    control_plane.add_token("t-alice", UserInfo("alice"))  # system:discovery only
    with _client(control_plane, "t-alice") as client:
        answer = client.get(openapiv2.PATH, headers={"Accept": "application/json"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    document = answer.json()
    spec = _spec()
    assert document["swagger"] == "2.0"
    assert document["info"] == {"title": "Kubernetes", "version": "v1.36.2"}
    assert document["paths"] == {k: v for k, v in spec["paths"].items() if k.startswith(PREFIX)}
    assert document["definitions"] == {k: spec["definitions"][k] for k in (WIDGET, META)}
    assert document["security"] == [{"BearerToken": []}]
    kinds = [gvk for schema in document["definitions"].values()
             for gvk in schema.get("x-kubernetes-group-version-kind", [])]  # fmt: skip
    assert kinds == [{"group": GROUP, "version": VERSION, "kind": "Widget"}]
    (seen,) = widgets.requests(openapiv2.PATH)
    assert seen.one("Accept") == "application/json"
    assert seen.one("X-Remote-User") == "system:aggregator"
    assert seen.all("X-Remote-Group") == []


def test_an_etag_and_304_and_no_accept_is_json(
    control_plane: ControlPlane, widgets: backend.Backend
) -> None:
    with _client(control_plane) as client:
        first = client.get(openapiv2.PATH)
        etag = first.headers["etag"]
        again = client.get(openapiv2.PATH, headers={"If-None-Match": etag})
        changed = client.get(openapiv2.PATH, headers={"If-None-Match": '"stale"'})
        refused = client.get(openapiv2.PATH, headers={"Accept": "text/html"})
    assert first.status_code == 200 and first.json()["swagger"] == "2.0"
    assert etag.startswith('"') and etag.endswith('"') and len(etag) == 130
    assert first.headers["vary"] == "Accept"
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    assert changed.status_code == 200 and changed.headers["etag"] == etag
    assert refused.status_code == 406


def test_a_backend_that_does_not_answer_is_left_out(control_plane: ControlPlane) -> None:
    control_plane.register_api_service(GROUP, VERSION, f"https://127.0.0.1:{free_port()}",
                                       Authority("nobody").cert_pem)  # fmt: skip
    with _client(control_plane) as client:
        answer = client.get(openapiv2.PATH)
        protobuf = client.get(openapiv2.PATH, headers={"Accept": PROTOBUF})
    assert answer.status_code == 200
    assert answer.json()["paths"] == {} and answer.json()["definitions"] == {}
    assert protobuf.status_code == 404


def test_two_backends_share_equal_definitions_and_rename_clashing_ones(
    control_plane: ControlPlane, widgets: backend.Backend
) -> None:
    other_group = "other.gpustack.ai"
    clashing = {"type": "object", "description": "a different ObjectMeta"}
    gadgets = _spec(other_group, "Gadget", meta=clashing)
    with (backend.running(control_plane, other_group, VERSION, _routes(gadgets)),
          _client(control_plane) as client):
        document = client.get(openapiv2.PATH).json()
        protobuf = client.get(openapiv2.PATH, headers={"Accept": PROTOBUF})
    definitions = document["definitions"]
    assert set(definitions) == {WIDGET, META, "ai.gpustack.example.v1.Gadget", f"{META}_v2"}
    assert definitions[f"{META}_v2"] == clashing
    assert definitions["ai.gpustack.example.v1.Gadget"]["properties"]["metadata"] == _ref(
        f"{META}_v2")
    assert definitions[WIDGET]["properties"]["metadata"] == _ref(META)
    assert len(document["paths"]) == 2
    # the protobuf form is only relayed from a single backend
    assert protobuf.status_code == 404


def test_the_merge_keeps_a_path_it_has_and_shares_an_equal_definition() -> None:
    document = openapiv2.base("v1.36.2")
    openapiv2.merge_into(document, openapiv2.filtered_by_prefix(_spec(), f"{PREFIX}/"))
    again = copy.deepcopy(_spec())
    path = next(iter(again["paths"]))
    again["paths"][path]["get"]["description"] = "a second copy of the same path"
    openapiv2.merge_into(document, openapiv2.filtered_by_prefix(again, f"{PREFIX}/"))
    assert "description" not in document["paths"][path]["get"]
    assert set(document["definitions"]) == {WIDGET, META}


def test_the_protobuf_form_is_relayed_from_the_only_backend(
    control_plane: ControlPlane, widgets: backend.Backend
) -> None:
    with _client(control_plane) as client:
        answer = client.get(openapiv2.PATH, headers={"Accept": PROTOBUF})
        again = client.get(openapiv2.PATH, headers={"Accept": PROTOBUF,
                                                    "If-None-Match": answer.headers["etag"]})
    assert answer.status_code == 200
    assert answer.content == PROTOBUF_BODY
    assert answer.headers["content-type"] == "application/octet-stream"
    assert again.status_code == 304
    (seen,) = widgets.requests(openapiv2.PATH)[-1:]
    assert seen.one("X-Remote-User") == "system:aggregator"
