"""The control plane's API semantics on the wire: watch (bookmarks, timeoutSeconds, selectors,
sendInitialEvents, 410), patches, finalizers, paging, and the test switches (hold, fail, drop,
recorded requests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit.controlplane import ADMIN_TOKEN, ControlPlane, Rule, UserInfo, resources
from tests.integration.controlplane import samples

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def http(control_plane: ControlPlane) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=control_plane.url, verify=control_plane.trust(), timeout=30,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ) as client:  # fmt: skip
        yield client


def _lines(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line:
            yield json.loads(line)


def _cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": name}}


def test_watch_from_a_version_with_label_transitions(http: httpx.Client) -> None:
    start = http.get(CMS).json()["metadata"]["resourceVersion"]
    http.post(CMS, json=_cm("a", tier="gold"))
    http.post(CMS, json=_cm("b", tier="silver"))
    http.patch(CMS + "/b", json={"metadata": {"labels": {"tier": "gold"}}},
               headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
    http.patch(CMS + "/a", json={"metadata": {"labels": {"tier": None}}},
               headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
    params = {"watch": "true", "resourceVersion": start, "labelSelector": "tier in (gold)",
              "timeoutSeconds": "1"}  # fmt: skip
    with http.stream("GET", CMS, params=params) as response:
        assert response.headers["content-type"] == "application/json"
        events = [(e["type"], e["object"]["metadata"]["name"]) for e in _lines(response)]
    assert events == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]


def test_watch_without_a_version_starts_with_the_current_state(
    http: httpx.Client, control_plane: ControlPlane
) -> None:
    http.post(CMS, json=_cm("present"))
    params = {"watch": "1", "allowWatchBookmarks": "true", "sendInitialEvents": "true",
              "resourceVersionMatch": "NotOlderThan", "timeoutSeconds": "1"}  # fmt: skip
    with http.stream("GET", CMS, params=params) as response:
        events = list(_lines(response))
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    mark = events[1]["object"]
    assert mark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert mark["metadata"]["resourceVersion"] == str(control_plane.store.revision)


def test_bookmark_on_demand(http: httpx.Client, control_plane: ControlPlane) -> None:
    start = http.get(CMS).json()["metadata"]["resourceVersion"]
    seen: list[dict[str, Any]] = []
    params = {"watch": "true", "resourceVersion": start, "allowWatchBookmarks": "true",
              "timeoutSeconds": "60"}  # fmt: skip
    with http.stream("GET", CMS, params=params) as response:
        control_plane.request_bookmark()
        for event in _lines(response):
            seen.append(event)
            break
    assert seen[0]["type"] == "BOOKMARK"
    assert seen[0]["object"]["kind"] == "ConfigMap"
    assert int(seen[0]["object"]["metadata"]["resourceVersion"]) >= int(start)


RECORDED_BOOKMARKS = samples.load("watch-bookmarks.json")["events"]


@pytest.mark.parametrize("recorded", RECORDED_BOOKMARKS,
                         ids=[e["object"]["kind"] for e in RECORDED_BOOKMARKS])
def test_bookmarks_carry_the_kinds_empty_object_as_recorded(
    http: httpx.Client, control_plane: ControlPlane, recorded: dict[str, Any]
) -> None:
    """kube-apiserver's BOOKMARK object is the kind's empty object as Go writes it (a Pod's
    ``"spec": {"containers": null}``), not metadata alone."""
    (kind,) = [k for k in resources.ALL if k.kind == recorded["object"]["kind"]
               and k.api_version == recorded["object"]["apiVersion"]]
    path = kind.base_path("default")
    start = http.get(path).json()["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": start, "allowWatchBookmarks": "true",
              "timeoutSeconds": "60"}  # fmt: skip
    with http.stream("GET", path, params=params) as response:
        control_plane.request_bookmark()
        event = next(_lines(response))
    assert event["type"] == "BOOKMARK"
    assert samples.without(event["object"], "metadata.resourceVersion") == samples.without(
        recorded["object"], "metadata.resourceVersion")


@pytest.mark.parametrize("spec", [{"drivers": []}, {"drivers": None}, {}, None])
def test_a_csinode_without_drivers_is_served_with_drivers_null(
    http: httpx.Client, spec: dict[str, Any] | None
) -> None:
    """As kube-apiserver answers (kube-samples/csinode-no-drivers.json, kubelet's CSINode
    before any driver registers): Go writes the empty list as null."""
    body: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                            "metadata": {"name": "node-a"}}
    if spec is not None:
        body["spec"] = spec
    path = resources.CSINODES.base_path()
    created = http.post(path, json=body).json()
    recorded = samples.load("csinode-no-drivers.json")
    assert created["spec"] == recorded["spec"] == {"drivers": None}
    assert http.get(path).json()["items"][0]["spec"] == {"drivers": None}
    updated = http.put(path + "/node-a", json=dict(created, spec={"drivers": []})).json()
    assert updated["spec"] == {"drivers": None}


def test_watch_of_a_compacted_version_is_a_410_event(
    http: httpx.Client, control_plane: ControlPlane
) -> None:
    start = http.get(CMS).json()["metadata"]["resourceVersion"]
    http.post(CMS, json=_cm("x"))
    head = control_plane.store.compact()
    with http.stream("GET", CMS, params={"watch": "true", "resourceVersion": start}) as response:
        assert response.status_code == 200
        events = list(_lines(response))
    assert events == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {start} ({head + 1})", "reason": "Expired",
        "code": 410,
    }}]  # fmt: skip


def test_patches_finalizers_and_preconditions(http: httpx.Client) -> None:
    created = http.post(CMS, json={**_cm("f"), "metadata": {"name": "f", "finalizers": ["x/y"]}})
    assert created.status_code == 201
    patched = http.patch(CMS + "/f", json=[{"op": "add", "path": "/data/j", "value": "1"}],
                         headers={"Content-Type": "application/json-patch+json"})  # fmt: skip
    assert patched.json()["data"] == {"k": "f", "j": "1"}
    refused = http.patch(CMS + "/f", content=b"{}", headers={"Content-Type": "text/plain"})
    assert refused.status_code == 415 and refused.json()["reason"] == "UnsupportedMediaType"
    stale = http.request(
        "DELETE", CMS + "/f", json={"preconditions": {"uid": "not-it"}}
    )
    assert stale.status_code == 409
    assert "Precondition failed: UID in precondition: not-it" in stale.json()["message"]
    kept = http.delete(CMS + "/f")
    assert kept.status_code == 200 and kept.json()["metadata"]["deletionTimestamp"]
    assert http.get(CMS + "/f").status_code == 200
    gone = http.patch(CMS + "/f", json={"metadata": {"finalizers": None}},
                      headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
    assert gone.status_code == 200
    assert http.get(CMS + "/f").status_code == 404


def test_status_subresource_keeps_spec_and_main_writes_keep_status(
    http: httpx.Client, control_plane: ControlPlane
) -> None:
    control_plane.seed(resources.NODES, {"metadata": {"name": "n"}, "spec": {},
                                         "status": {"phase": "Running"}})  # fmt: skip
    merge = {"Content-Type": "application/merge-patch+json"}
    both = {"spec": {"unschedulable": True}, "status": {"phase": "X"}}
    main = http.patch("/api/v1/nodes/n", json=both, headers=merge)
    assert main.json()["status"] == {"phase": "Running"}
    both = {"spec": {"unschedulable": False}, "status": {"phase": "Y"}}
    status = http.patch("/api/v1/nodes/n/status", json=both, headers=merge)
    assert status.json()["spec"] == {"unschedulable": True}
    assert status.json()["status"] == {"phase": "Y"}
    assert http.get("/api/v1/nodes", params={"fieldSelector": "spec.unschedulable=true"}).json()[
        "items"][0]["metadata"]["name"] == "n"  # fmt: skip
    assert http.get("/api/v1/namespaces/default/configmaps/x/status").status_code == 404


def test_paging_and_deletecollection(http: httpx.Client) -> None:
    for name in ("p1", "p2", "p3"):
        http.post(CMS, json=_cm(name, page="yes"))
    first = http.get(CMS, params={"limit": "2"}).json()
    assert [i["metadata"]["name"] for i in first["items"]] == ["p1", "p2"]
    assert first["metadata"]["remainingItemCount"] == 1
    assert "kind" not in first["items"][0] and "apiVersion" not in first["items"][0]
    rest = http.get(CMS, params={"limit": "2", "continue": first["metadata"]["continue"]}).json()
    assert [i["metadata"]["name"] for i in rest["items"]] == ["p3"]
    assert "continue" not in rest["metadata"]
    deleted = http.delete(CMS, params={"labelSelector": "page=yes"}).json()
    assert deleted["kind"] == "ConfigMapList" and len(deleted["items"]) == 3
    assert http.get(CMS).json()["items"] == []


def test_bad_selectors_and_names_are_4xx(http: httpx.Client) -> None:
    assert http.get(CMS, params={"labelSelector": "a b c"}).status_code == 400
    bad_name = http.post(CMS, json={"metadata": {"name": "Not_Valid"}})
    assert bad_name.status_code == 422 and bad_name.json()["reason"] == "Invalid"
    wrong_ns = http.post(CMS, json={"metadata": {"name": "x", "namespace": "other"}})
    assert wrong_ns.status_code == 400
    assert http.get("/api/v1/namespaces/default/widgets").status_code == 404
    assert http.post(CMS, content=b"{not json").status_code == 400
    protobuf = http.post(CMS, content=b"\x00k8s", headers={
        "Content-Type": "application/vnd.kubernetes.protobuf"})  # fmt: skip
    assert protobuf.status_code == 415 and protobuf.json()["reason"] == "UnsupportedMediaType"


def test_rbac_table_guards_the_api(control_plane: ControlPlane) -> None:
    control_plane.add_token("t-reader", UserInfo("reader"))
    control_plane.policy.grant("reader", Rule(("get", "list"), ("",), ("configmaps",),
                                              resource_names=("allowed",)), namespace="default")
    with httpx.Client(base_url=control_plane.url, verify=control_plane.trust(),
                      headers={"Authorization": "Bearer t-reader"}) as reader:  # fmt: skip
        control_plane.seed(resources.CONFIGMAPS,
                           {"metadata": {"name": "allowed", "namespace": "default"}})
        assert reader.get(CMS + "/allowed").status_code == 200
        denied = reader.get(CMS + "/other")
        assert denied.status_code == 403
        assert denied.json()["message"] == (
            'configmaps "other" is forbidden: User "reader" cannot get resource "configmaps" in '
            'API group "" in the namespace "default"'
        )
        assert denied.json()["details"] == {"name": "other", "kind": "configmaps"}
        assert reader.get(CMS).status_code == 403
        assert reader.get(CMS, params={"fieldSelector": "metadata.name=allowed"}).status_code == 200
        assert reader.get("/version").status_code == 200
        path = reader.get("/metrics")
        assert path.json()["message"] == 'forbidden: User "reader" cannot get path "/metrics"'
        assert path.json()["details"] == {}
        nodes = reader.get("/api/v1/nodes")
        assert nodes.json()["message"].endswith("at the cluster scope")


def test_hold_fail_drop_and_recorded_requests(
    http: httpx.Client, control_plane: ControlPlane
) -> None:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": "x"}}  # fmt: skip
    path = "/apis/authentication.k8s.io/v1/tokenreviews"
    with control_plane.hold(r"tokenreviews$") as fault:
        with pytest.raises(httpx.ReadTimeout):
            http.post(path, json=review, timeout=httpx.Timeout(30, read=0.5))
        assert fault.wait_entered(1)
    with control_plane.fail(r"tokenreviews$", 503, "overloaded", count=1):
        assert http.post(path, json=review).status_code == 503
        assert http.post(path, json=review).status_code == 201
    with control_plane.drop(r"tokenreviews$", count=1), pytest.raises(httpx.RemoteProtocolError):
        http.post(path, json=review)
    recorded = control_plane.recorder.requests("/tokenreviews", "POST")
    assert len(recorded) == 4  # in order of arrival: held, failed, served, dropped
    assert [r.code for r in recorded[1:]] == [503, 201, 0]
    assert recorded[0].body == review and recorded[0].user == "admin"
    assert "authorization" not in recorded[0].headers
