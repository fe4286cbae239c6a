"""The conformance suite run as an operator would, against the real standalone server."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support import apiserver as support

REPO = support.REPO
TENANT_RULES = {"tenant.reads-own", "tenant.writes-refused", "tenant.other-namespaces-refused"}


NODE = "conformance-node"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    """A NodeModelStore to look at: the server keeps one for ``--node`` (its node stores run
    in-process with ``--controllers=external``, without the resolver)."""
    data = tmp_path_factory.mktemp("conformance-server")
    with support.running(data, extra_args=["--node", NODE, "--controllers=external"]) as running:
        running.wait_for(f"/apis/worker.gpustack.ai/v1/nodemodelstores/{NODE}")
        yield running


def _conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def test_every_rule_passes_and_only_the_tenant_rules_skip(
    server: support.RunningServer, tmp_path: pathlib.Path
) -> None:
    report = tmp_path / "report.json"
    done = _conformance("--kubeconfig", str(server.kubeconfig), "--json", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(report.read_text())["results"]
    outcomes = {r["rule"]: r for r in results}
    assert len(outcomes) == len(results)  # one line per rule
    skipped = {rule for rule, r in outcomes.items() if r["outcome"] == "skip"}
    assert skipped == TENANT_RULES
    assert all(outcomes[rule]["reason"] == "no --tenant-kubeconfig given" for rule in skipped)
    passed = {rule for rule, r in outcomes.items() if r["outcome"] == "pass"}
    for expected in ("discovery.legacy", "discovery.aggregated", "openapi.v3", "openapi.explain",
                     "crud.update", "patch.unsupported", "watch.events", "columns.kubectl-wide",
                     "validation.one-source", "status.preserved", "status.artifact-guard",
                     "status.nodemodelstore-guard", "progress.names-no-node",
                     "nodemodelstores.create-refused", "cleanup"):  # fmt: skip
        assert expected in passed, outcomes.get(expected)
    assert len(passed) + len(skipped) == len(outcomes) >= 35
    assert "0 failed" in done.stdout


def test_it_leaves_nothing_behind(server: support.RunningServer) -> None:
    done = _conformance("--kubeconfig", str(server.kubeconfig), "--only", "crud or watch")
    assert done.returncode == 0, done.stdout + done.stderr
    with server.client() as client:
        listed = client.get("/apis/worker.gpustack.ai/v1/modelartifacts").json()
    assert [i for i in listed["items"] if i["metadata"]["namespace"].startswith("conformance-")] \
        == []


def test_a_broken_rule_is_reported_as_a_failure(server: support.RunningServer) -> None:
    """The worker may write status, so run as the worker the status guard check must fail."""
    done = _conformance("--kubeconfig", str(server.worker_kubeconfig), "--only", "artifact_guard")
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if "status.artifact-guard" in x)
    assert line.startswith("FAIL")
    assert "1 failed" in done.stdout


def test_usage_errors() -> None:
    done = _conformance("--kubeconfig", "/nonexistent/kubeconfig")
    assert done.returncode == 2 and "no such file" in done.stderr
    done = _conformance("--help")
    assert done.returncode == 0 and "--tenant-kubeconfig" in done.stdout
