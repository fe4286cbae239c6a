"""Printer columns (Table and kubectl) and the progress subresource."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from conformance import api as a
from conformance.api import Api
from conformance.fixtures import Run
from conformance.kubectl import Kubectl
from conformance.rules import rule

ARTIFACT_COLUMNS = ["Name", "Source", "Revision", "Size", "Ready", "Downloading", "Resolved"]
STORE_COLUMNS = ["Name", "Ready", "Used", "Models", "Downloading"]


def _columns(admin: Api, path: str) -> list[tuple[str, int]]:
    response = admin.get(path, accept=a.TABLE)
    assert response.status_code == 200, response.text[:300]
    body = response.json()
    assert body["kind"] == "Table"
    return [(c["name"], c["priority"]) for c in body["columnDefinitions"]]


@rule("columns.table", "the Table view has the artifact and node store columns, Age only at "
      "priority 1 (wide)")  # fmt: skip
def check_table(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("columns")
    columns = _columns(admin, a.artifacts(conformance_run.namespace))
    assert [n for n, p in columns if p == 0] == ARTIFACT_COLUMNS
    assert ("Age", 1) in columns
    columns = _columns(admin, a.stores())
    assert [n for n, p in columns if p == 0] == STORE_COLUMNS
    assert ("Age", 1) in columns


@rule("columns.kubectl-wide", "kubectl get mart/nms prints the columns, and AGE only with -o wide")
def check_kubectl_columns(conformance_run: Run, kubectl: Kubectl) -> None:
    conformance_run.create_artifact("columns-kubectl")
    namespace = conformance_run.namespace
    plain = kubectl.ok("get", "mart", "-n", namespace).splitlines()[0].split()
    assert plain == [c.upper() for c in ARTIFACT_COLUMNS]
    wide = kubectl.ok("get", "mart", "-n", namespace, "-o", "wide").splitlines()[0].split()
    assert wide == [*(c.upper() for c in ARTIFACT_COLUMNS), "AGE"]
    output = kubectl.ok("get", "nms", "-o", "wide")
    if output.strip():
        assert output.splitlines()[0].split() == [*(c.upper() for c in STORE_COLUMNS), "AGE"]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@rule("progress.shape", "GET .../progress answers a ModelArtifactProgress with counts, a timestamp "
      "and a reason when there is nothing to count")  # fmt: skip
def check_progress_shape(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("progress")
    response = admin.get(a.artifacts(conformance_run.namespace, "progress") + "/progress")
    assert response.status_code == 200, response.text[:300]
    body = response.json()
    assert body["kind"] == "ModelArtifactProgress"
    assert body["apiVersion"] == f"{a.GROUP}/v1"
    assert body["metadata"] == {"name": "progress", "namespace": conformance_run.namespace}
    datetime.datetime.fromisoformat(body["timestamp"].replace("Z", "+00:00"))
    for field in ("ready", "downloading", "failed", "downloadingBytes", "live"):
        assert isinstance(body[field], int) and body[field] >= 0, field
    assert isinstance(body["failureReasons"], list)
    if "manifestDigest" not in body:
        assert isinstance(body.get("reason"), str) and body["reason"]
    else:
        assert isinstance(body["sizeBytes"], int)
    if body["downloading"] == 0:
        assert "downloadingPercent" not in body


@rule("progress.names-no-node", "progress names no node: no NodeModelStore name and no node "
      "field appears in it")  # fmt: skip
def check_progress_names_no_node(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("progress-nodes")
    body = admin.get(a.artifacts(conformance_run.namespace, "progress-nodes") + "/progress").json()
    strings = set(_strings(body))
    assert not {s for s in strings if s.lower() in ("node", "nodes", "nodename")}
    stores = admin.get(a.stores()).json()["items"]
    names = {item["metadata"]["name"] for item in stores}
    assert not names & strings, names & strings


@rule("progress.missing", "progress of a missing artifact is 404")
def check_progress_missing(conformance_run: Run, admin: Api) -> None:
    path = a.artifacts(conformance_run.namespace, f"missing-{conformance_run.id}") + "/progress"
    assert admin.get(path).status_code == 404


@rule("progress.read-only", "progress refuses writes (405)")
def check_progress_read_only(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("progress-ro")
    path = a.artifacts(conformance_run.namespace, "progress-ro") + "/progress"
    response = admin.put(path, {"kind": "ModelArtifactProgress"})
    if response.status_code == 404:
        pytest.fail("PUT on progress answered 404 instead of 405")
    assert response.status_code == 405, response.status_code
