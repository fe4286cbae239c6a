"""kube.decoding: what kube-apiserver really writes decodes into lightkube's models, a table per
kind of the objects the worker, the server and the plugin read (nulls where Go has a nil list or
map, absent optional fields, unknown fields, watch BOOKMARKs); what still does not fit becomes an
``Undecodable`` that names the field and never the content."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Literal

import msgspec
import pytest
from lightkube.resources.authentication_v1 import SelfSubjectReview, TokenReview
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Node, PersistentVolumeClaim, Pod, Secret
from lightkube.resources.storage_v1 import CSINode

from kube import decoding, resources

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "kube-samples"


def sample(name: str) -> Any:
    return json.loads((SAMPLES / f"{name}.json").read_text())


def _meta(name: str = "x", namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "7"}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _pod(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": _meta("p", "ns"), "spec": spec,
            "status": status or {}}


def _container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", **fields}


# (model, what kube-apiserver sent, a path into the decoded object, what is found there)
CASES: dict[str, tuple[type[Any], Any, str, Any]] = {
    # CSINode: kubelet creates it before any driver registers; Go writes the nil list as null.
    "csinode recorded before drivers": (
        CSINode, sample("csinode-no-drivers"), "spec.drivers", []),
    "csinode drivers null": (CSINode, {"metadata": _meta(), "spec": {"drivers": None}},
                             "spec.drivers", []),
    "csinode topologyKeys null": (CSINode, sample("csinode"), "spec.drivers.0.topologyKeys",
                                  None),
    "csinode allocatable absent, unknown field": (
        CSINode, {"metadata": _meta(), "spec": {"drivers": [
            {"name": "d", "nodeID": "n", "futureField": {"a": [1]}}]}, "status": {"x": None}},
        "spec.drivers.0.name", "d"),
    # Node (its uid owns the NodeModelStore).
    "node recorded Ready, unknown status.declaredFeatures": (
        Node, sample("node-ready"), "status.nodeInfo.kubeletVersion", "v1.36.2"),
    "node recorded by the fixture's recording": (Node, sample("node"), "spec.taints.0.key",
                                                 "node.kubernetes.io/not-ready"),
    "node lists null": (Node, {"metadata": _meta(), "spec": {"taints": None, "podCIDRs": None},
                               "status": {"conditions": None, "addresses": None,
                                          "images": None, "volumesAttached": None}},
                        "status.conditions", None),
    "node nothing but metadata": (Node, {"metadata": _meta()}, "metadata.uid", None),
    # Pod (the status guard's pod lookup, the plugin Pods the worker lists).
    "pod recorded running, lastProbeTime null": (
        Pod, sample("pod-running"), "status.conditions.0.lastProbeTime", None),
    "pod recorded bound to a node": (Pod, sample("pod-bound-to-node"), "spec.nodeName",
                                     "node-a"),
    "pod containers null": (Pod, _pod({"containers": None}), "spec.containers", []),
    "pod env, ports, volumeMounts null": (
        Pod, _pod({"containers": [_container(env=None, ports=None, volumeMounts=None,
                                             args=None)]}),
        "spec.containers.0.env", None),
    "pod status lists null": (
        Pod, _pod({"containers": [_container()]}, {"conditions": None,
                                                   "containerStatuses": None, "podIPs": None}),
        "status.conditions", None),
    "pod volume cephfs monitors null": (
        Pod, _pod({"containers": [_container()],
                   "volumes": [{"name": "v", "cephfs": {"monitors": None}}]}),
        "spec.volumes.0.cephfs.monitors", []),
    "pod required nodeSelectorTerms null": (
        Pod, _pod({"containers": [_container()], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": None}}}}),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms", []),
    "pod unknown fields": (
        Pod, _pod({"containers": [_container(futureField=True)], "futureSpec": {}},
                  {"futureStatus": [None]}), "spec.containers.0.image", "busybox"),
    # Lease (the worker's leader election; kubelet's node lease).
    "lease recorded node lease": (Lease, sample("lease-node"), "spec.holderIdentity", "vm"),
    "lease recorded by the fixture's recording": (Lease, sample("lease"), "metadata.name",
                                                  sample("lease")["metadata"]["name"]),
    "lease holder null, spec empty": (Lease, {"metadata": _meta(), "spec": {
        "holderIdentity": None, "renewTime": None}}, "spec.holderIdentity", None),
    # ConfigMap (settings, the CA bundle, extension-apiserver-authentication).
    "configmap recorded empty: no data key": (
        ConfigMap, sample("configmap-empty"), "data", None),
    "configmap data null": (ConfigMap, {"metadata": _meta(), "data": None, "binaryData": None},
                            "data", None),
    "configmap extension-apiserver-authentication": (
        ConfigMap, sample("extension-apiserver-authentication"),
        "data.requestheader-allowed-names", '["front-proxy-client"]'),
    # Secret (hub tokens).
    "secret recorded empty": (Secret, sample("secret-empty"), "type", "Opaque"),
    "secret data null": (Secret, {"metadata": _meta(), "data": None, "stringData": None},
                         "data", None),
    # PersistentVolumeClaim (the claims controller).
    "pvc recorded pending": (PersistentVolumeClaim, sample("pvc-pending"), "status.phase",
                             "Pending"),
    "pvc lists null": (PersistentVolumeClaim, {"metadata": _meta(), "spec": {
        "accessModes": None, "resources": {"requests": None}}, "status": {"conditions": None}},
        "spec.accessModes", None),
    # TokenReview (the plugin's HTTPS port).
    "tokenreview recorded": (TokenReview, sample("tokenreview-bound-sa"), "status.user.username",
                             "system:serviceaccount:gpustack-system:model-manager-node"),
    "tokenreview recorded invalid": (TokenReview, sample("tokenreview-invalid"),
                                     "status.authenticated", None),
    "tokenreview groups, audiences null": (
        TokenReview, {"metadata": {}, "spec": {"token": "t", "audiences": None}, "status": {
            "authenticated": True, "audiences": None,
            "user": {"username": "u", "groups": None, "extra": {"k": None}}}},
        "status.user.groups", None),
    # SubjectAccessReview and SelfSubjectReview (the server reads them as JSON too).
    "sar recorded": (SubjectAccessReview, sample("sar-allowed"), "status.allowed", True),
    "sar groups null": (SubjectAccessReview, {"spec": {"user": "u", "groups": None},
                                              "status": {"allowed": False}},
                        "spec.groups", None),
    "selfsubjectreview recorded": (SelfSubjectReview, sample("selfsubjectreview-sa"),
                                   "status.userInfo.uid",
                                   "13dd404c-0056-41bf-b858-e4232a8c48a2"),
    "selfsubjectreview groups null": (
        SelfSubjectReview, {"status": {"userInfo": {"username": "u", "groups": None}}},
        "status.userInfo.groups", None),
}


def _at(obj: Any, path: str) -> Any:
    for part in path.split(".") if path else []:
        if isinstance(obj, list):
            obj = obj[int(part)]
        elif isinstance(obj, dict):
            obj = obj[part]
        else:
            obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize(("model", "body", "path", "expected"), CASES.values(), ids=CASES.keys())
def test_what_kube_apiserver_writes_decodes(
    model: type[Any], body: Any, path: str, expected: Any
) -> None:
    decoded = decoding.decode(model, json.loads(json.dumps(body)))
    assert isinstance(decoded, model)
    assert _at(decoded, path) == expected


MODELS = {"Pod": Pod, "CSINode": CSINode, "Lease": Lease, "Node": Node, "ConfigMap": ConfigMap,
          "Secret": Secret, "PersistentVolumeClaim": PersistentVolumeClaim}
BOOKMARKS = sample("watch-bookmarks")["events"]


@pytest.mark.parametrize("event", BOOKMARKS, ids=[e["object"]["kind"] for e in BOOKMARKS])
def test_recorded_bookmarks_decode_into_the_model(event: dict[str, Any]) -> None:
    """A real BOOKMARK carries the kind's empty object: a Pod's is ``"spec": {"containers":
    null}``, a CSINode's ``"spec": {"drivers": null}``."""
    body = event["object"]
    decoded = decoding.decode(MODELS[body["kind"]], body)
    assert isinstance(decoded, MODELS[body["kind"]])
    assert decoded.metadata.resourceVersion == body["metadata"]["resourceVersion"]


def test_a_bookmark_of_metadata_only_for_a_model_that_requires_a_spec() -> None:
    mark = decoding.decode(CSINode, {"kind": "CSINode", "apiVersion": "storage.k8s.io/v1",
                                     "metadata": {"resourceVersion": "9"}})
    assert isinstance(mark, decoding.Bookmark)
    assert mark.metadata.resourceVersion == "9" and mark.to_dict()["kind"] == "CSINode"


def test_what_does_not_fit_names_the_field_never_the_content() -> None:
    secret = {"metadata": {"name": "hub-token", "namespace": "team-a", "resourceVersion": "12"},
              "immutable": "yes", "data": {"token": "czNjcjN0"}}
    found = decoding.decode(Secret, secret)
    assert isinstance(found, decoding.Undecodable)
    assert (found.resource, found.key) == ("secrets", "team-a/hub-token")
    assert "$.immutable" in found.reason
    assert found.metadata.resourceVersion == "12"  # a watch resumes after it
    assert "czNjcjN0" not in repr(found) and "yes" not in found.reason
    # A required field missing, a list where an object goes, an item that is null.
    assert "drivers" in _reason(CSINode, {"metadata": _meta(), "spec": {}})
    assert "$.spec" in _reason(Pod, {"metadata": _meta(), "spec": []})
    assert "$.spec.drivers[0]" in _reason(CSINode, {"metadata": _meta(),
                                                    "spec": {"drivers": [None]}})
    nameless = decoding.decode(CSINode, None)
    assert isinstance(nameless, decoding.Undecodable) and nameless.key == "(unnamed)"


class _Mode(msgspec.Struct):
    mode: Literal["a", "b"]


def test_values_quoted_in_msgspec_messages_are_left_out() -> None:
    found = decoding.decode(_Mode, {"mode": "s3cr3t"})
    assert isinstance(found, decoding.Undecodable)
    assert "s3cr3t" not in found.reason and "$.mode" in found.reason


def _reason(model: type[Any], body: Any) -> str:
    found = decoding.decode(model, body)
    assert isinstance(found, decoding.Undecodable)
    return found.reason


class Tree(msgspec.Struct):
    children: list[Tree]
    tags: dict[str, list[str]]
    note: str | None = None


def test_nulls_are_filled_at_any_depth_in_a_recursive_model() -> None:
    body = {"children": [{"children": None, "tags": {"a": None, "b": ["x"]}}, None],
            "tags": None, "note": None}
    filled = decoding.fill_nulls(Tree, body)
    assert filled is body  # in place: the decoder owns freshly parsed JSON
    assert body == {"children": [{"children": [], "tags": {"a": [], "b": ["x"]}}, None],
                    "tags": {}, "note": None}


def test_the_response_type_stands_in_for_typed_models_only() -> None:
    stand_in = decoding.tolerant(CSINode)
    assert decoding.tolerant(CSINode) is stand_in and issubclass(stand_in, dict)
    assert stand_in.__name__ == "CSINode"  # lightkube names its list model after it
    assert isinstance(stand_in({"metadata": _meta(), "spec": {"drivers": None}}), CSINode)
    assert decoding.tolerant(resources.NodeModelStore) is resources.NodeModelStore


def test_resources_are_named_as_kube_names_them() -> None:
    assert decoding.resource_name(CSINode) == "csinodes.storage.k8s.io"
    assert decoding.resource_name(Pod) == "pods"
    assert decoding.resource_name(Tree) == "Tree"
