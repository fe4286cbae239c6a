"""The gate's patches (``openapi.warmgate``), applied with a real JSON Patch library: gating at
admission keeps what the Pod had, and the release narrows only by additions (what kube lets a
gated Pod change, KEP-3838), removes the gate and the label, and tests the resourceVersion."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from openapi import keys, placement, warmgate

GATE = {"name": keys.WARM_NODE_GATE}


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "team", "resourceVersion": "7"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def test_gating_adds_the_gate_and_the_label_keeping_the_pods_own() -> None:
    bare = pod()
    gated = jsonpatch.apply_patch(bare, warmgate.gate_patch(bare))
    assert gated["spec"]["schedulingGates"] == [GATE]
    assert gated["metadata"]["labels"] == {keys.WAITING_FOR_WARM_NODE: "true"}
    theirs = pod(schedulingGates=[{"name": "example.com/quota"}])
    theirs["metadata"]["labels"] = {"app": "web"}
    both = jsonpatch.apply_patch(theirs, warmgate.gate_patch(theirs))
    assert both["spec"]["schedulingGates"] == [{"name": "example.com/quota"}, GATE]
    assert both["metadata"]["labels"] == {"app": "web", keys.WAITING_FOR_WARM_NODE: "true"}
    assert warmgate.gated(both) and not warmgate.gated(theirs)
    assert warmgate.gate_patch(both) == []


def test_the_release_narrows_by_additions_and_removes_only_its_gate() -> None:
    own = {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
    obj = pod(schedulingGates=[{"name": "example.com/quota"}, GATE],
              affinity={"nodeAffinity": {placement.REQUIRED: {"nodeSelectorTerms": [own]}}})
    obj["metadata"]["labels"] = {"app": "web", keys.WAITING_FOR_WARM_NODE: "true"}
    expression = placement.expression(["n1", "n2"])
    released = jsonpatch.apply_patch(obj, warmgate.release_patch(obj, [expression]))
    assert released["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert released["metadata"]["labels"] == {"app": "web"}
    (term,) = released["spec"]["affinity"]["nodeAffinity"][placement.REQUIRED][
        "nodeSelectorTerms"]
    # the Pod's own expression is kept first and unchanged; ours is added (AND)
    assert term["matchExpressions"] == [own["matchExpressions"][0], expression]
    bare = pod(schedulingGates=[GATE])
    done = jsonpatch.apply_patch(bare, warmgate.release_patch(bare, [expression]))
    assert done["spec"]["schedulingGates"] == []
    assert done["spec"]["affinity"] == {"nodeAffinity": {placement.REQUIRED: {
        "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}


def test_the_release_applies_to_the_pod_it_was_computed_from_only() -> None:
    obj = pod(schedulingGates=[GATE])
    operations = warmgate.release_patch(obj, [placement.expression(["n1"])])
    newer = copy.deepcopy(obj)
    newer["metadata"]["resourceVersion"] = "8"
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(newer, operations)
    assert warmgate.release_patch(pod(), [placement.expression(["n1"])]) == []
