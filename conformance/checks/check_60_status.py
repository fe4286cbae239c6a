"""Status: preserved on main-resource writes; only the worker and the plugins write it."""

from __future__ import annotations

import json

import pytest

from conformance import api as a
from conformance.api import Api
from conformance.fixtures import Run
from conformance.rules import rule

FAKE_DIGEST = "sha256:" + "0" * 64


@rule("status.preserved", "a main-resource update carrying a status keeps the stored status")
def check_preserved(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("status-keep")
    forged_status = {
        "observedGeneration": 99,
        "resolved": {"revision": "f" * 40, "manifestDigest": FAKE_DIGEST,
                     "digestSource": "Hub", "fileCount": 1, "sizeBytes": 1},
        "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved",
                        "message": "forged", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }  # fmt: skip
    path = a.artifacts(conformance_run.namespace, "status-keep")
    # the resolver writes the real status meanwhile: a conflict is re-read and retried
    response = admin.update(path, lambda current: {**current, "status": forged_status})
    assert response.status_code == 200, response.text[:300]
    for body in (response.json(), admin.get(path).json()):
        text = json.dumps(body.get("status", {}))
        assert FAKE_DIGEST not in text and "forged" not in text and '"observedGeneration": 99' \
            not in text, text[:300]
    merged = admin.patch(path, {"status": {"resolved": {"manifestDigest": FAKE_DIGEST}}},
                         a.MERGE_PATCH)  # fmt: skip
    assert merged.status_code == 200
    assert FAKE_DIGEST not in json.dumps(merged.json().get("status", {}))


@rule("status.artifact-guard", "a ModelArtifact status write by anyone but the worker is 403")
def check_artifact_guard(conformance_run: Run, admin: Api) -> None:
    created = conformance_run.create_artifact("status-guard")
    path = a.artifacts(conformance_run.namespace, "status-guard") + "/status"
    put = admin.put(path, {**created, "status": {"observedGeneration": 1}})
    assert put.status_code == 403, put.text[:300]
    assert put.json()["reason"] == "Forbidden"
    patch = admin.patch(path, {"status": {"observedGeneration": 1}}, a.MERGE_PATCH)
    assert patch.status_code == 403, patch.text[:300]
    # the guard's refusal (an admin passes RBAC), or RBAC's for an identity without the verb
    message = patch.json()["message"]
    assert ("only the worker writes a ModelArtifact's status" in message
            or 'cannot patch resource "modelartifacts/status"' in message), message[:300]


@rule("status.nodemodelstore-guard", "a NodeModelStore status write by an identity that is not "
      "the node's plugin is 403")  # fmt: skip
def check_store_guard(admin: Api) -> None:
    listed = admin.get(a.stores()).json()["items"]
    if not listed:
        pytest.skip("no NodeModelStore exists yet (no node runs the plugin)")
    name = listed[0]["metadata"]["name"]
    for response in (
            admin.patch(a.stores(name) + "/status", {"status": {"models": []}}, a.MERGE_PATCH),
            admin.put(a.stores(name) + "/status", {**listed[0], "status": {"models": []}})):
        assert response.status_code == 403, response.text[:300]
        assert response.json()["reason"] == "Forbidden"
        # the guard names the rule it refused by (an admin passes RBAC), or RBAC refused
        message = response.json()["message"]
        assert ("refused by rule 1 (plugin service account)" in message
                or 'resource "nodemodelstores/status"' in message), message[:300]
