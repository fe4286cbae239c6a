"""The conformance suite run as an operator would, against the real standalone server, with a
tenant: ``alice`` holds the ``model-artifact-reader`` Role in one namespace and ``getter`` only
``get modelartifacts`` there (a static token and ``DATA_DIR/policy.yaml``, as docs/auth.md
says). Every rule passes, none is skipped; and wrong tenants make the tenant rules fail."""

from __future__ import annotations

import json
import pathlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devkit.harness import apiserver as support

REPO = support.REPO
NODE = "conformance-node"
TENANT_NS = "conformance-tenant"
TENANT_RULES = {"tenant.reads-own", "tenant.writes-refused", "tenant.other-namespaces-refused",
                "tenant.status-refused", "tenant.progress-needs-its-own-grant"}
# alice: what the chart's notes tell an operator to bind; mallory: a Role far too wide;
# nobody: a token bound to nothing; getter: get alone
USERS = ("alice", "mallory", "nobody")
POLICY = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: model-artifact-reader, namespace: {TENANT_NS}}}
rules:
  - apiGroups: [worker.gpustack.ai]
    resources: [modelartifacts, modelartifacts/progress]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: alice-reader, namespace: {TENANT_NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: model-artifact-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: get-only, namespace: {TENANT_NS}}}
rules:
  - {{apiGroups: [worker.gpustack.ai], resources: [modelartifacts], verbs: [get]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: getter, namespace: {TENANT_NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: get-only}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: getter}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: too-much}}
rules:
  - apiGroups: [worker.gpustack.ai]
    resources: ["*"]
    verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: mallory-too-much}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: too-much}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: mallory}}]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    """Tenants in the token file and the policy before the first start (the server adds its
    own three identities to the token file); a NodeModelStore to look at: the server keeps one
    for ``--node`` (its node stores run in-process with ``--controllers=external``)."""
    data = tmp_path_factory.mktemp("conformance-server")
    data.chmod(0o700)
    tokens = "".join(f'{secrets.token_hex(16)},{user},{user}-uid,"tenants"\n' for user in USERS)
    (data / "tokens.csv").write_text(tokens)
    (data / "tokens.csv").chmod(0o600)
    (data / "policy.yaml").write_text(POLICY)
    with support.running(data, extra_args=["--node", NODE, "--controllers=external"]) as running:
        running.wait_for(f"/apis/worker.gpustack.ai/v1/nodemodelstores/{NODE}")
        yield running


def _kubeconfig(server: support.RunningServer, user: str, directory: pathlib.Path
                ) -> pathlib.Path:
    """The admin kubeconfig with ``user``'s token instead (the server's CA, its URL)."""
    token = support.read_tokens(server.data_dir / "tokens.csv")[user]
    document: dict[str, Any] = yaml.safe_load(server.kubeconfig.read_text())
    document["users"][0]["user"] = {"token": token}
    path = directory / f"{user}.kubeconfig"
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


def _conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def _results(report: pathlib.Path) -> dict[str, dict[str, str]]:
    results = json.loads(report.read_text())["results"]
    outcomes = {r["rule"]: r for r in results}
    assert len(outcomes) == len(results)  # one line per rule
    return outcomes


def _tenant_args(server: support.RunningServer, user: str, tmp_path: pathlib.Path,
                 get_only: str = "getter") -> list[str]:
    return ["--tenant-kubeconfig", str(_kubeconfig(server, user, tmp_path)),
            "--tenant-namespace", TENANT_NS, "--get-only-user", get_only]


def test_every_rule_passes_with_a_tenant(
    server: support.RunningServer, tmp_path: pathlib.Path
) -> None:
    report = tmp_path / "report.json"
    done = _conformance("--kubeconfig", str(server.kubeconfig), "--json", str(report),
                        *_tenant_args(server, "alice", tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = _results(report)
    failed_or_skipped = {rule: r for rule, r in outcomes.items() if r["outcome"] != "pass"}
    assert failed_or_skipped == {}
    for expected in ("discovery.legacy", "discovery.aggregated", "openapi.v3", "openapi.explain",
                     "crud.update", "patch.unsupported", "patch.apply", "watch.events",
                     "columns.kubectl-wide",
                     "validation.one-source", "status.preserved", "status.artifact-guard",
                     "status.nodemodelstore-guard", "progress.names-no-node", "version.info",
                     "version.kubectl", "nodemodelstores.create-refused", "cleanup",
                     *TENANT_RULES):  # fmt: skip
        assert expected in outcomes, expected
    assert len(outcomes) >= 42
    assert f"{len(outcomes)} passed, 0 failed, 0 skipped" in done.stdout
    with server.client() as client:  # the tenant namespace is left clean too
        listed = client.get(f"/apis/worker.gpustack.ai/v1/namespaces/{TENANT_NS}/modelartifacts")
    assert listed.json()["items"] == []


def test_without_a_tenant_only_the_tenant_rules_skip(
    server: support.RunningServer, tmp_path: pathlib.Path
) -> None:
    report = tmp_path / "report.json"
    done = _conformance("--kubeconfig", str(server.kubeconfig), "--json", str(report),
                        "--only", "tenant or version")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = _results(report)
    skipped = {rule for rule, r in outcomes.items() if r["outcome"] == "skip"}
    assert skipped == TENANT_RULES
    assert all(outcomes[rule]["reason"] == "no --tenant-kubeconfig given" for rule in skipped)
    assert outcomes["version.info"]["outcome"] == "pass"


@pytest.mark.parametrize(("user", "get_only", "failing"), [
    # a Role far too wide: it may write, see every namespace and NodeModelStores
    ("mallory", "getter", {"tenant.writes-refused", "tenant.other-namespaces-refused"}),
    # a token bound to nothing: it cannot even read its namespace
    ("nobody", "getter", {"tenant.reads-own"}),
    # the "get-only" subject holds progress too
    ("alice", "alice", {"tenant.progress-needs-its-own-grant"}),
])  # fmt: skip
def test_a_wrong_tenant_setup_fails_the_tenant_rules(
    server: support.RunningServer, tmp_path: pathlib.Path, user: str, get_only: str,
    failing: set[str],
) -> None:
    report = tmp_path / "report.json"
    done = _conformance("--kubeconfig", str(server.kubeconfig), "--json", str(report),
                        "--only", "tenant", *_tenant_args(server, user, tmp_path, get_only))
    assert done.returncode == 1, done.stdout + done.stderr
    outcomes = _results(report)
    assert {rule for rule, r in outcomes.items() if r["outcome"] == "fail"} >= failing
    assert not [r for r in outcomes.values() if r["outcome"] == "skip"]
    for rule in failing:
        line = next(x for x in done.stdout.splitlines() if f"  {rule} " in x)
        assert line.startswith("FAIL")


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


def test_usage_errors(tmp_path: pathlib.Path) -> None:
    done = _conformance("--kubeconfig", "/nonexistent/kubeconfig")
    assert done.returncode == 2 and "no such file" in done.stderr
    done = _conformance("--help")
    assert done.returncode == 0 and "--tenant-kubeconfig" in done.stdout
    assert "--get-only-user" in done.stdout
    config = tmp_path / "k"
    config.write_text("apiVersion: v1\nkind: Config\n")
    done = _conformance("--kubeconfig", str(config), "--get-only-user", "bob")
    assert done.returncode == 2 and "--get-only-user needs --tenant-namespace" in done.stderr
