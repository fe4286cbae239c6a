"""The Pod webhooks' reviews (``apiserver.endpoints.podwebhook``): the AdmissionReview shape
kube-apiserver sends and reads back, fill and prefer over a fake of what the server watches, and
their failure modes (artifact missing, facts not read in time, malformed reviews)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import jsonpatch
import pytest

from apiserver import errors
from apiserver.endpoints import podwebhook
from openapi import keys, placement, volume, wire

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
UID = "5d2c3e4f-0000-4000-8000-000000000001"


class Facts:
    """What the server watches, as the test sets it; ``read`` False: never read in time."""

    def __init__(self, artifacts: dict[str, dict[str, Any]] | None = None,
                 warm: dict[str, list[str]] | None = None, read: bool = True) -> None:
        self.artifacts = artifacts or {}
        self.warm = warm or {}
        self.read = read
        self.waited: list[float] = []

    async def artifacts_read(self, timeout: float) -> bool:
        self.waited.append(timeout)
        await asyncio.sleep(0)
        return self.read

    async def nodes_read(self, timeout: float) -> bool:
        return await self.artifacts_read(timeout)

    def artifact(self, namespace: str, name: str) -> wire.Readable | None:
        return self.artifacts.get(f"{namespace}/{name}")

    def warm_nodes(self, digest: str) -> list[str]:
        return self.warm.get(digest, [])


def resolved(name: str = "qwen", digest: str = DIGEST) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
            "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
            "status": {"resolved": {"manifestDigest": digest},
                       "conditions": [{"type": "Resolved", "status": "True"}]}}


def pod(*volumes: dict[str, str], annotations: dict[str, str] | None = None,
        affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], "volumes": [
        {"name": f"m{i}", "csi": {"driver": volume.DRIVER, "volumeAttributes": dict(v)}}
        for i, v in enumerate(volumes)]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-", "annotations": annotations or {}},
            "spec": spec}


def review(obj: dict[str, Any] | None, *, operation: str = "CREATE",
           kind: str = "Pod") -> dict[str, Any]:
    """As kube-apiserver 1.3x sends it (``admission.k8s.io/v1``)."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": UID, "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": kind},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team", "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


def run(step: Any, body: dict[str, Any], facts: Facts) -> dict[str, Any]:
    found: dict[str, Any] = asyncio.run(step(podwebhook.parse(body), facts))
    assert found["apiVersion"] == "admission.k8s.io/v1" and found["kind"] == "AdmissionReview"
    assert found["response"]["uid"] == UID
    return dict(found["response"])


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    operations = json.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(obj, operations)
    return result


def attributes(obj: dict[str, Any], index: int = 0) -> dict[str, str]:
    found: dict[str, str] = obj["spec"]["volumes"][index]["csi"]["volumeAttributes"]
    return found


def test_fill_names_only_the_artifact() -> None:
    obj = pod({"artifact": "qwen"})
    response = run(podwebhook.fill, review(obj), Facts({"team/qwen": resolved()}))
    assert response["allowed"] is True and "warnings" not in response
    assert attributes(patched(obj, response)) == {
        "artifact": "qwen", "artifactUID": "uid-qwen", "manifestDigest": DIGEST}


def test_fill_reads_the_request_namespace_not_another() -> None:
    obj = pod({"artifact": "qwen"})
    elsewhere = resolved()
    response = run(podwebhook.fill, review(obj), Facts({"other/qwen": elsewhere}))
    assert response["allowed"] is True and "patch" not in response
    assert "no ModelArtifact 'qwen' in namespace 'team'" in response["warnings"][0]


def test_fill_when_the_artifacts_were_not_read_in_time_admits_unchanged() -> None:
    facts = Facts({"team/qwen": resolved()}, read=False)
    response = run(podwebhook.fill, review(pod({"artifact": "qwen"})), facts)
    assert response["allowed"] is True and "patch" not in response
    assert "has not read the cluster's ModelArtifacts" in response["warnings"][0]
    assert facts.waited == [podwebhook.SYNC_WAIT]


def test_anything_but_a_pod_create_with_model_volumes_is_admitted_unchanged() -> None:
    facts = Facts({"team/qwen": resolved()}, {DIGEST: ["a"]})
    for body in (review(pod({"artifact": "qwen"}), operation="UPDATE"),
                 review({"metadata": {}}, kind="Deployment"),
                 review(pod())):
        for step in (podwebhook.fill, podwebhook.prefer):
            response = run(step, body, facts)
            assert response == {"uid": UID, "allowed": True}
    assert facts.waited == []  # nothing waited for what it does not need


def test_prefer_adds_one_term_per_digest_merged_with_the_pods_own() -> None:
    theirs = {"weight": 3, "preference": {"matchExpressions": [
        {"key": "gpu", "operator": "Exists"}]}}
    obj = pod({"artifact": "a", "manifestDigest": DIGEST},
              {"artifact": "b", "manifestDigest": OTHER},
              {"artifact": "c", "manifestDigest": DIGEST},
              affinity={"nodeAffinity": {placement.PREFERRED: [theirs]}})
    response = run(podwebhook.prefer, review(obj), Facts(warm={DIGEST: ["n2", "n1"],
                                                              OTHER: ["n3"]}))
    terms = patched(obj, response)["spec"]["affinity"]["nodeAffinity"][placement.PREFERRED]
    assert terms == [theirs, placement.preferred_term(["n2", "n1"]),
                     placement.preferred_term(["n3"])]


def test_prefer_adds_nothing_where_no_node_holds_it() -> None:
    obj = pod({"artifact": "a", "manifestDigest": DIGEST})
    response = run(podwebhook.prefer, review(obj), Facts())
    assert response == {"uid": UID, "allowed": True}


def test_prefer_skips_kueue_placed_pods() -> None:
    obj = pod({"artifact": "a", "manifestDigest": DIGEST},
              annotations={keys.KUEUE_PREFERRED_TOPOLOGY: "kubernetes.io/hostname"})
    response = run(podwebhook.prefer, review(obj), Facts(warm={DIGEST: ["n1"]}))
    assert response == {"uid": UID, "allowed": True}


def test_prefer_when_the_stores_were_not_read_in_time_admits_unchanged() -> None:
    obj = pod({"artifact": "a", "manifestDigest": DIGEST})
    response = run(podwebhook.prefer, review(obj), Facts(warm={DIGEST: ["n1"]}, read=False))
    assert response["allowed"] is True and "patch" not in response
    assert "NodeModelStores" in response["warnings"][0]


def test_the_opt_in_requires_a_warm_node_or_refuses_saying_why() -> None:
    on = {keys.REQUIRE_WARM_NODE: keys.REQUIRE_WARM_NODE_ON}
    obj = pod({"artifact": "a", "manifestDigest": DIGEST}, annotations=on)
    response = run(podwebhook.prefer, review(obj), Facts(warm={DIGEST: ["n1"]}))
    node_affinity = patched(obj, response)["spec"]["affinity"]["nodeAffinity"]
    assert node_affinity == {placement.REQUIRED: {"nodeSelectorTerms": [
        {"matchExpressions": [placement.expression(["n1"])]}]}}
    cold = run(podwebhook.prefer, review(obj), Facts())
    assert cold["allowed"] is False and "patch" not in cold
    assert cold["status"]["code"] == 403
    assert f"no node holds {DIGEST} Ready now" in cold["status"]["message"]
    assert keys.REQUIRE_WARM_NODE in cold["status"]["message"]
    unfilled = pod({"artifact": "a"}, annotations=on)
    refused = run(podwebhook.prefer, review(unfilled), Facts(warm={DIGEST: ["n1"]}))
    assert refused["allowed"] is False
    assert "names no manifestDigest" in refused["status"]["message"]


def test_more_digests_than_the_bound_are_warned_about() -> None:
    digests = [f"sha256:{i:064x}" for i in range(podwebhook.MAX_DIGESTS + 3)]
    obj = pod(*[{"artifact": f"a{i}", "manifestDigest": d} for i, d in enumerate(digests)])
    response = run(podwebhook.prefer, review(obj), Facts(warm={d: ["n1"] for d in digests}))
    terms = patched(obj, response)["spec"]["affinity"]["nodeAffinity"][placement.PREFERRED]
    assert len(terms) == podwebhook.MAX_DIGESTS
    assert response["warnings"] == [f"only the first {podwebhook.MAX_DIGESTS} of "
                                    f"{len(digests)} model digests get a placement term"]


@pytest.mark.parametrize(("body", "field"), [
    ({"kind": "AdmissionReview", "request": {}}, "apiVersion"),
    ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}, "apiVersion"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}, "kind"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}, "request"),
    ({**review(pod()), "request": {**review(pod())["request"], "uid": ""}}, "request.uid"),
    ({**review(pod()), "request": {**review(pod())["request"], "uid": "u" * 129}},
     "request.uid"),
    ({**review(pod()), "request": {**review(pod())["request"], "namespace": 7}},
     "request.namespace"),
    ({**review(pod()), "request": {**review(pod())["request"], "kind": "Pod"}}, "request.kind"),
    (review(None), "request.object"),
])
def test_a_malformed_review_is_a_bad_request_naming_the_field(body: dict[str, Any],
                                                              field: str) -> None:
    with pytest.raises(errors.BadRequest) as caught:
        podwebhook.parse(body)
    assert f": {field} " in caught.value.message
    assert len(caught.value.message) < 200
