"""The fixture's aggregated discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList`` on
``/apis`` and ``/api``): its own groups converted from its legacy lists as kube converts them,
each APIService's group as its backend answers the aggregator's own request (or its legacy list
converted; left out when it answers neither), kube's Content-Type, ETag and 304; read by the
real Python client's models and by kubectl 1.32 (aggregator.md 1.6)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from devkit.controlplane import ADMIN_TOKEN, Authority, ControlPlane, UserInfo
from devkit.harness.apiserver import free_port
from tests.integration.controlplane import backend
from tests.support.kubectl import Kubectl

GROUP, VERSION = "example.gpustack.ai", "v1"
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = f"{V2},application/json;g=apidiscovery.k8s.io;v=v2beta1;" \
                 "as=APIGroupDiscoveryList,application/json"
WIDGETS = {
    "resource": "widgets",
    "responseKind": {"group": GROUP, "version": VERSION, "kind": "Widget"},
    "scope": "Namespaced", "singularResource": "widget",
    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    "shortNames": ["wd"], "categories": ["gpustack"],
    "subresources": [{"subresource": "status",
                      "responseKind": {"group": GROUP, "version": VERSION, "kind": "Widget"},
                      "verbs": ["get", "patch", "update"]}],
}  # fmt: skip
VERSION_ITEM = {"version": VERSION, "resources": [WIDGETS], "freshness": "Current"}
BACKEND_DOCUMENT = {
    "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
    "items": [
        {"metadata": {"name": GROUP}, "versions": [
            VERSION_ITEM, {"version": "v2alpha1", "resources": [], "freshness": "Current"}]},
        {"metadata": {"name": "not-registered.example"}, "versions": [VERSION_ITEM]},
    ],
}  # fmt: skip
LEGACY_LIST = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [
        {"name": "widgets", "singularName": "widget", "namespaced": True, "kind": "Widget",
         "verbs": ["get", "list"], "shortNames": ["wd"]},
        {"name": "widgets/status", "singularName": "", "namespaced": True, "kind": "Widget",
         "verbs": ["get"]},
    ],
}  # fmt: skip


def _aggregated(seen: backend.Seen) -> backend.Answer:
    return backend.json_answer(BACKEND_DOCUMENT, content_type=V2)


@pytest.fixture
def widgets(control_plane: ControlPlane) -> Iterator[backend.Backend]:
    with backend.running(control_plane, GROUP, VERSION, {"/apis": _aggregated}) as running:
        yield running


def _client(cp: ControlPlane, token: str = ADMIN_TOKEN) -> httpx.Client:
    return httpx.Client(base_url=cp.url, verify=cp.trust(), timeout=30,
                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def _group(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        item for item in document["items"] if item["metadata"].get("name") == name]
    (group,) = found
    return group


def _resource(group: dict[str, Any], name: str) -> dict[str, Any]:
    (version,) = group["versions"]
    found: list[dict[str, Any]] = [r for r in version["resources"] if r["resource"] == name]
    (resource,) = found
    return resource


def test_apis_lists_the_fixtures_groups_and_the_backends(
    control_plane: ControlPlane, widgets: backend.Backend
) -> None:
    control_plane.add_token("t-alice", UserInfo("alice"))  # system:discovery only
    with _client(control_plane, "t-alice") as client:
        answer = client.get("/apis", headers={"Accept": KUBECTL_ACCEPT})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == V2
    assert answer.headers["vary"] == "Accept"
    assert answer.headers["cache-control"] == "public"
    document = answer.json()
    assert (document["kind"], document["apiVersion"], document["metadata"]) == (
        "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2", {})
    names = [item["metadata"]["name"] for item in document["items"]]
    assert names[-1] == GROUP  # an APIService's lower priority lists it after the built-ins
    assert {"coordination.k8s.io", "storage.k8s.io", "events.k8s.io", "authentication.k8s.io",
            "authorization.k8s.io"} <= set(names)  # fmt: skip
    # the backend's item, only the APIService's version, as the backend answered it
    assert _group(document, GROUP) == {"metadata": {"name": GROUP}, "versions": [VERSION_ITEM]}
    assert "not-registered.example" not in names
    assert _resource(_group(document, "coordination.k8s.io"), "leases") == {
        "resource": "leases", "responseKind": {"group": "", "version": "", "kind": "Lease"},
        "scope": "Namespaced", "singularResource": "lease",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                  "watch"],
    }  # fmt: skip
    assert _resource(_group(document, "authorization.k8s.io"), "subjectaccessreviews") == {
        "resource": "subjectaccessreviews",
        "responseKind": {"group": "", "version": "", "kind": "SubjectAccessReview"},
        "scope": "Cluster", "singularResource": "subjectaccessreview", "verbs": ["create"],
    }  # fmt: skip
    (seen,) = widgets.requests("/apis")
    assert seen.one("X-Remote-User") == "system:kube-aggregator"
    assert seen.all("X-Remote-Group") == ["system:masters"]
    assert seen.one("Accept").startswith(f"{V2},")


def test_api_is_the_core_group_without_a_name(control_plane: ControlPlane) -> None:
    with _client(control_plane) as client:
        answer = client.get("/api", headers={"Accept": V2})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == V2
    (item,) = answer.json()["items"]
    assert item["metadata"] == {}
    assert [v["version"] for v in item["versions"]] == ["v1"]
    assert _resource(item, "pods")["subresources"] == [{
        "subresource": "status", "responseKind": {"group": "", "version": "", "kind": "Pod"},
        "verbs": ["get", "patch", "update"]}]  # fmt: skip
    namespaces = _resource(item, "namespaces")
    assert (namespaces["scope"], namespaces["shortNames"]) == ("Cluster", ["ns"])


def test_an_etag_and_304_and_plain_json_is_the_legacy_list(
    control_plane: ControlPlane, widgets: backend.Backend
) -> None:
    with _client(control_plane) as client:
        first = client.get("/apis", headers={"Accept": V2})
        etag = first.headers["etag"]
        again = client.get("/apis", headers={"Accept": V2, "If-None-Match": etag})
        stale = client.get("/apis", headers={"Accept": V2, "If-None-Match": '"old"'})
        legacy = client.get("/apis", headers={"Accept": "application/json"})
        preferred = client.get("/apis", headers={"Accept": f"application/json, {V2}"})
        protobuf_first = client.get("/apis", headers={"Accept": (
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;"
            f"as=APIGroupDiscoveryList,{V2}")})
    assert etag.startswith('"') and len(etag) == 130
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    assert stale.status_code == 200 and stale.json() == first.json()
    assert legacy.json()["kind"] == "APIGroupList"
    assert legacy.headers["content-type"] == "application/json"
    assert GROUP in [g["name"] for g in legacy.json()["groups"]]
    assert preferred.json()["kind"] == "APIGroupList"
    assert protobuf_first.headers["content-type"] == V2  # no protobuf: the JSON v2 it is


def test_the_legacy_list_of_a_backend_without_aggregated_discovery_is_converted(
    control_plane: ControlPlane
) -> None:
    path = f"/apis/{GROUP}/{VERSION}"
    routes = {path: lambda seen: backend.json_answer(LEGACY_LIST)}
    with (backend.running(control_plane, GROUP, VERSION, routes) as running,
          _client(control_plane) as client):
        document = client.get("/apis", headers={"Accept": V2}).json()
    assert _group(document, GROUP)["versions"] == [{"version": VERSION, "freshness": "Current",
                                                    "resources": [{
        "resource": "widgets", "responseKind": {"group": "", "version": "", "kind": "Widget"},
        "scope": "Namespaced", "singularResource": "widget", "verbs": ["get", "list"],
        "shortNames": ["wd"],
        "subresources": [{"subresource": "status",
                          "responseKind": {"group": "", "version": "", "kind": "Widget"},
                          "verbs": ["get"]}],
    }]}]  # fmt: skip
    (legacy,) = running.requests(path)
    assert legacy.one("X-Remote-User") == "system:kube-aggregator"
    assert legacy.all("X-Remote-Group") == []


def test_a_backend_that_does_not_answer_is_left_out(control_plane: ControlPlane) -> None:
    control_plane.register_api_service(GROUP, VERSION, f"https://127.0.0.1:{free_port()}",
                                       Authority("nobody").cert_pem)  # fmt: skip
    with _client(control_plane) as client:
        answer = client.get("/apis", headers={"Accept": V2})
    assert answer.status_code == 200
    assert GROUP not in [item["metadata"]["name"] for item in answer.json()["items"]]


def test_the_python_clients_models_read_both_documents(
    control_plane: ControlPlane, widgets: backend.Backend
) -> None:
    api = k8s.ApiClient()
    with _client(control_plane) as client:
        for path in ("/api", "/apis"):
            answer = client.get(path, headers={"Accept": V2})
            # the generated models forbid unknown fields and require resource, scope,
            # singularResource and verbs
            listed = api.deserialize(answer.text, "V2APIGroupDiscoveryList", "application/json")
            assert isinstance(listed, k8s.V2APIGroupDiscoveryList)
            assert listed.items
    widgets_model = listed.items[-1].versions[0].resources[0]
    assert (widgets_model.resource, widgets_model.short_names) == ("widgets", ["wd"])


def test_kubectl_api_resources_lists_the_backends_resources_from_aggregated_discovery(
    control_plane: ControlPlane, widgets: backend.Backend, tmp_path: pathlib.Path
) -> None:
    config = control_plane.write_kubeconfig(tmp_path / "admin.kubeconfig", token=ADMIN_TOKEN)
    kubectl = Kubectl(config, tmp_path / "cache")
    out = kubectl.run("api-resources", "--no-headers", "-o", "wide").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert rows["widgets"][1:5] == ["wd", f"{GROUP}/{VERSION}", "true", "Widget"]
    assert rows["leases"][1:4] == ["coordination.k8s.io/v1", "true", "Lease"]
    assert rows["pods"][1:5] == ["po", "v1", "true", "Pod"]
    grouped = kubectl.run("api-resources", f"--api-group={GROUP}", "-o", "name").stdout.split()
    assert grouped == [f"widgets.{GROUP}"]
    # kubectl took everything from the two aggregated documents: no per-version lists
    paths = {entry.path for entry in control_plane.recorder.requests()}
    assert {"/api", "/apis"} <= paths
    assert not {p for p in paths if p.startswith("/apis/") or p.startswith("/api/")}
    accepted = [entry.headers.get("accept", "") for entry in
                control_plane.recorder.requests("/apis")]  # fmt: skip
    assert all("g=apidiscovery.k8s.io;v=v2" in accept for accept in accepted)
