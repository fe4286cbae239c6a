"""The client's placement (``kube.placement``): the volume and the term a caller that renders
Pods itself puts in them, the same the Pod webhooks would add to a Pod naming only the
artifact."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import jsonpatch
import pytest

from apiserver.endpoints import podwebhook
from kube import placement
from openapi import placement as rules
from openapi import volume, wire

DIGEST = "sha256:" + "ab" * 32


def artifact(resolved: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Resolved",
                                              "status": "True" if resolved else "False"}]}
    if resolved:
        status["resolved"] = {"manifestDigest": DIGEST}
    return {"metadata": {"name": "qwen", "namespace": "team", "uid": "u-1"},
            "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
            "status": status}


def store(node: str, **entry: Any) -> dict[str, Any]:
    return {"metadata": {"name": node}, "status": {
        "models": [{"digest": DIGEST, "state": "Ready", **entry}],
        "conditions": [{"type": "Ready", "status": "True"}]}}


def csinode(node: str, driver: str = volume.DRIVER) -> dict[str, Any]:
    return {"metadata": {"name": node}, "spec": {"drivers": [{"name": driver}]}}


STORES = [store("b", lastUsedTime="2026-01-01T00:00:00Z"), store("a"), store("c"),
          store("d", referenced=True)]
CSINODES = [csinode("a"), csinode("b"), csinode("c", "other.csi.example.com"), csinode("d")]


def test_the_volume_and_the_nodes() -> None:
    found = placement.place(artifact(), STORES, CSINODES, volume_name="weights")
    assert found.volume == {"name": "weights", "csi": {
        "driver": volume.DRIVER, "readOnly": True, "volumeAttributes": {
            "artifact": "qwen", "artifactUID": "u-1", "manifestDigest": DIGEST}}}
    assert found.nodes == ("d", "b", "a")  # c: its CSINode lacks the driver
    assert found.preferred_term == rules.preferred_term(["d", "b", "a"])
    assert found.required_expression == rules.expression(["d", "b", "a"])
    # no CSINodes to read (a standalone server): every store's node counts
    assert placement.place(artifact(), STORES, None).nodes == ("d", "b", "a", "c")
    cold = placement.place(artifact(), [], CSINODES)
    assert cold.nodes == () and cold.preferred_term is None and cold.required_expression is None


def test_an_artifact_the_plugin_would_refuse() -> None:
    with pytest.raises(placement.NotMountable, match="team/qwen: it is not resolved yet"):
        placement.place(artifact(resolved=False), STORES, CSINODES)


class Facts:
    """The webhooks' view of the same objects."""

    async def artifacts_read(self, timeout: float) -> bool:
        return True

    async def nodes_read(self, timeout: float) -> bool:
        return True

    def artifact(self, namespace: str, name: str) -> wire.Readable | None:
        return artifact() if (namespace, name) == ("team", "qwen") else None

    def warm_nodes(self, digest: str) -> list[str]:
        plugin_nodes = {wire.text(c, "metadata", "name") for c in CSINODES
                        if rules.lists_driver(c)}
        return rules.warm_nodes(STORES, digest, plugin_nodes)


def test_the_same_as_the_webhooks_make_of_a_pod_naming_only_the_artifact() -> None:
    found = placement.place(artifact(), STORES, CSINODES)
    named = {"metadata": {}, "spec": {"containers": [], "volumes": [
        {"name": "model", "csi": {"driver": volume.DRIVER, "readOnly": True,
                                  "volumeAttributes": {"artifact": "qwen"}}}]}}
    for step in (podwebhook.fill, podwebhook.prefer):
        review = podwebhook.parse({
            "apiVersion": podwebhook.API_VERSION, "kind": podwebhook.KIND, "request": {
                "uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE", "namespace": "team", "object": named}})
        response = asyncio.run(step(review, Facts()))["response"]
        named = jsonpatch.apply_patch(named, json.loads(base64.b64decode(response["patch"])))
    assert named["spec"]["volumes"] == [found.volume]
    assert named["spec"]["affinity"] == {"nodeAffinity": {rules.PREFERRED: [
        found.preferred_term]}}
