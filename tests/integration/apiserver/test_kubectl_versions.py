"""A smoke subset with the oldest (1.27) and newest (1.33) kubectl on this machine.

kubectl up to 1.28 reads OpenAPI v2 only as protobuf (validation probe, ``explain``), so 1.27 also
checks that form; 1.33 reads OpenAPI v3 and prefers aggregated discovery v2.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from devkit.harness import apiserver as support
from tests.support import kubectl as kubectl_support

BINARIES = kubectl_support.VERSIONS


@pytest.fixture(params=BINARIES)
def kubectl(
    request: pytest.FixtureRequest, apiserver: support.RunningServer, tmp_path: pathlib.Path
) -> kubectl_support.Kubectl:
    return kubectl_support.of_version(request.param, apiserver.kubeconfig, tmp_path / "cache")


def test_smoke(kubectl: kubectl_support.Kubectl) -> None:
    ns = f"smoke-{kubectl.binary.name.replace('.', '-')}"
    resources = kubectl.run("api-resources", "--api-group=worker.gpustack.ai").stdout
    assert "modelartifacts" in resources
    assert "nms" in resources
    manifest: dict[str, Any] = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": "smoke", "namespace": ns, "labels": {"run": "first"}},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2.5-0.5B-Instruct"}}},
    }
    assert "created" in kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(manifest)).stdout
    manifest["metadata"]["labels"] = {"run": "second"}
    assert "configured" in kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(manifest)).stdout
    got = json.loads(kubectl.run("get", "mart", "smoke", "-n", ns, "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"run": "second"}
    wide = kubectl.run("get", "mart", "-n", ns, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:2] == ["NAME", "SOURCE"]
    assert wide[0].split()[-1] == "AGE"
    kubectl.run("patch", "mart", "smoke", "-n", ns, "--type", "merge",
                "-p", '{"metadata":{"labels":{"patched":"yes"}}}')  # fmt: skip
    explained = kubectl.run("explain", "modelartifact.spec.source.huggingFace").stdout
    assert "repository" in explained
    manifest["metadata"]["name"] = "unknown-field"
    manifest["spec"]["surprise"] = 1
    err = kubectl.fails("create", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert 'unknown field "spec.surprise"' in err
    kubectl.run("delete", "mart", "smoke", "-n", ns, "--wait=true", "--timeout=30s")


def test_version_without_a_skew_warning(kubectl: kubectl_support.Kubectl) -> None:
    result = kubectl.run("version", "--output=json")
    assert "WARNING" not in result.stderr and "skew" not in result.stderr, result.stderr
    reported = json.loads(result.stdout)
    client, server = reported["clientVersion"], reported["serverVersion"]
    assert server["major"] == client["major"] == "1"
    assert server["minor"] == client["minor"].rstrip("+")
    assert server["gitVersion"].startswith(f"v1.{server['minor']}.0+model-manager-")
    plain = kubectl.run("version")  # 1.27 also warns that this output format is deprecated
    assert "version difference" not in plain.stderr and "skew" not in plain.stderr
    assert "model-manager-" in plain.stdout


def test_unknown_cells_print_blank(kubectl: kubectl_support.Kubectl) -> None:
    ns = f"cells-{kubectl.binary.name.replace('.', '-')}"
    manifest = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
                "metadata": {"name": "unresolved", "namespace": ns},
                "spec": {"source": {"huggingFace": {"repository": "a/b"}}}}
    kubectl.run("create", "-f", "-", stdin=yaml.safe_dump(manifest))
    header, row = kubectl.run("get", "mart", "unresolved", "-n", ns).stdout.splitlines()
    start = header.index("REVISION")
    end = header.index("SIZE")
    assert row[start:end].strip() == ""  # no resolved revision yet: a blank cell, not <none>
    assert "<none>" not in row and row.split()[:2] == ["unresolved", "a/b"]
