"""``kubectl apply --server-side`` with the oldest (1.27) and newest (1.33) kubectl on this machine:
create, a re-apply that changes nothing, two managers conflicting, ``--force-conflicts``, and a
client-side ``kubectl apply`` after a server-side one."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from devkit.harness import apiserver as support
from tests.support import kubectl as kubectl_support

BINARIES = kubectl_support.VERSIONS
GV = "worker.gpustack.ai/v1"


@pytest.fixture(params=BINARIES)
def kubectl(
    request: pytest.FixtureRequest, apiserver: support.RunningServer, tmp_path: pathlib.Path
) -> kubectl_support.Kubectl:
    return kubectl_support.of_version(request.param, apiserver.kubeconfig, tmp_path / "cache")


def _namespace(kubectl: kubectl_support.Kubectl, what: str) -> str:
    return f"{what}-{kubectl.binary.name.replace('.', '-')}"


def manifest(namespace: str, name: str = "ssa", **labels: str) -> str:
    body: dict[str, Any] = {
        "apiVersion": GV, "kind": "ModelArtifact",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2.5-0.5B-Instruct"}}},
    }
    return yaml.safe_dump(body)


def _get(kubectl: kubectl_support.Kubectl, namespace: str, name: str = "ssa") -> dict[str, Any]:
    got: dict[str, Any] = json.loads(kubectl.run(
        "get", "mart", name, "-n", namespace, "-o", "json", "--show-managed-fields").stdout)
    return got


def _managers(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]]


def test_server_side_apply_create_and_noop(kubectl: kubectl_support.Kubectl) -> None:
    ns = _namespace(kubectl, "ssa")
    out = kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest(ns, team="a")).stdout
    assert "serverside-applied" in out
    first = _get(kubectl, ns)
    assert _managers(first) == [("kubectl", "Apply")]
    assert first["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"] == {
        "f:labels": {"f:team": {}}}
    kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest(ns, team="a"))
    again = _get(kubectl, ns)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    dry = kubectl.run("apply", "--server-side", "--dry-run=server", "-o", "json", "-f", "-",
                      stdin=manifest(ns, team="dry"))
    assert json.loads(dry.stdout)["metadata"]["labels"] == {"team": "dry"}
    assert _get(kubectl, ns)["metadata"]["labels"] == {"team": "a"}


def test_two_managers_conflict_until_forced(kubectl: kubectl_support.Kubectl) -> None:
    ns = _namespace(kubectl, "ssa-conflict")
    kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest(ns, team="a"))
    err = kubectl.fails("apply", "--server-side", "--field-manager=other", "-f", "-",
                        stdin=manifest(ns, team="b"))
    assert ('Apply failed with 1 conflict: conflict with "kubectl": .metadata.labels.team'
            in err), err
    kubectl.run("label", "mart", "ssa", "-n", ns, "team=c", "--overwrite")
    err = kubectl.fails("apply", "--server-side", "--field-manager=other", "-f", "-",
                        stdin=manifest(ns, team="b"))
    assert (f'conflict with "kubectl-label" using {GV}: .metadata.labels.team' in err), err
    kubectl.run("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f",
                "-", stdin=manifest(ns, team="b"))
    forced = _get(kubectl, ns)
    assert forced["metadata"]["labels"] == {"team": "b"}
    assert ("other", "Apply") in _managers(forced)
    assert ("kubectl-label", "Update") not in _managers(forced)


def test_client_side_apply_after_server_side(kubectl: kubectl_support.Kubectl) -> None:
    ns = _namespace(kubectl, "ssa-csa")
    kubectl.run("apply", "--server-side", "-f", "-", stdin=manifest(ns, team="a"))
    done = kubectl.run("apply", "-f", "-", stdin=manifest(ns, team="a", tier="gold"))
    assert "configured" in done.stdout
    got = _get(kubectl, ns)
    assert got["metadata"]["labels"] == {"team": "a", "tier": "gold"}
    assert ("kubectl-client-side-apply", "Update") in _managers(got)
    assert "kubectl.kubernetes.io/last-applied-configuration" in got["metadata"]["annotations"]
