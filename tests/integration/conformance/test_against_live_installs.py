"""The conformance suite on live installations, where the controllers write status while it runs.

- standalone with its embedded controllers (the default ``make run`` gives), resolving every
  artifact the suite creates against the fixture hub: three runs in a row, with a tenant;
- cluster mode behind the fixture control plane's aggregator: the chart's RBAC applied, the
  server with the chart's args (its embedded controllers on), the suite run as the admin and a
  tenant through the control plane, three runs in a row.

Every rule passes in every run, none is skipped: the suite's read-modify-write checks retry a
controller's conflicting write as real clients do, and still prove a stale write is refused.
"""

from __future__ import annotations

import json
import pathlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from devkit import chartrbac, fixturehub, helm
from devkit.controlplane import ADMIN_TOKEN, ControlPlane, Role, Rule, Subject, UserInfo
from devkit.controlplane import resources as kinds
from devkit.harness import apiserver as support
from devkit.harness import clustermode
from tests.integration.conformance import test_against_standalone as standalone_suite

REPO = support.REPO
RUNS = 3
TENANT_NS = standalone_suite.TENANT_NS
GROUP = "worker.gpustack.ai"
NODE = "conformance-node"
ALICE = UserInfo("alice", uid="alice-uid", groups=("tenants",))
GETTER = UserInfo("getter", uid="getter-uid", groups=("tenants",))
CONTAINER_FLAGS = ("--bind", "--port", "--data-dir", "--tls-cert-file", "--tls-private-key-file")


def _conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def _three_clean_runs(admin: pathlib.Path, tenant: pathlib.Path, tmp_path: pathlib.Path
                      ) -> dict[str, dict[str, str]]:
    """The outcomes of the last run, by rule."""
    results: list[dict[str, str]] = []
    for run in range(RUNS):
        report = tmp_path / f"report-{run}.json"
        done = _conformance("--kubeconfig", str(admin), "--json", str(report),
                            "--tenant-kubeconfig", str(tenant), "--tenant-namespace", TENANT_NS,
                            "--get-only-user", GETTER.name)
        results = json.loads(report.read_text())["results"]
        failed = [f'{r["rule"]} {r["outcome"]}: {r["reason"]}' for r in results
                  if r["outcome"] != "pass"]
        assert failed == [], (run, "\n".join(failed), done.stderr[-2000:])
        assert done.returncode == 0, (run, done.stdout + done.stderr)
        assert len(results) >= 42
        assert f"{len(results)} passed, 0 failed, 0 skipped" in done.stdout
    return {r["rule"]: r for r in results}


@pytest.fixture(scope="module")
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        yield running


def test_three_runs_on_standalone_with_embedded_controllers(
        hub: fixturehub.Hub, tmp_path: pathlib.Path) -> None:
    data = tmp_path / "standalone"
    data.mkdir(mode=0o700)
    tokens = "".join(f'{secrets.token_hex(16)},{user},{user}-uid,"tenants"\n'
                     for user in standalone_suite.USERS)
    (data / "tokens.csv").write_text(tokens)
    (data / "tokens.csv").chmod(0o600)
    (data / "policy.yaml").write_text(standalone_suite.POLICY)
    with support.running(data, extra_args=[
            "--node", NODE, "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
    ]) as server:
        server.wait_for(f"/apis/{GROUP}/v1/nodemodelstores/{NODE}")
        alice = standalone_suite._kubeconfig(server, "alice", tmp_path)
        _three_clean_runs(server.kubeconfig, alice, tmp_path)
        log = server.log()
    # the resolver judged (and wrote the status of) the suite's artifacts while it ran
    assert log.count("controllers.events: ModelArtifact conformance-") >= RUNS * 10, log[-3000:]


def _cluster(cp: ControlPlane, hub: fixturehub.Hub) -> chartrbac.Chart:
    """``helm install`` on a one-node cluster, a tenant namespace with alice's reader Role and a
    get-only user, as docs/install.md tells an operator."""
    chart = chartrbac.render(sets=(f"settings.model-artifact-huggingface-endpoint={hub.endpoint}",))
    chart.apply(cp)
    cp.add_token(clustermode.WORKER_TOKEN, clustermode.WORKER)
    cp.seed(kinds.NODES, {"metadata": {"name": NODE, "uid": f"{NODE}-uid"}})
    cp.seed(kinds.CSINODES, {"metadata": {"name": NODE}, "spec": {"drivers": [
        {"name": "model.csi.gpustack.ai", "nodeID": NODE}]}})
    cp.seed(kinds.CONFIGMAPS, chart.one("ConfigMap"))
    cp.seed(kinds.NAMESPACES, {"metadata": {"name": TENANT_NS}})
    cp.add_token("alice-token", ALICE)
    cp.add_token("getter-token", GETTER)
    cp.policy.add_role(Role("model-artifact-reader", (Rule(
        ("get", "list", "watch"), (GROUP,), ("modelartifacts", "modelartifacts/progress")),),
        namespace=TENANT_NS))
    cp.policy.bind("model-artifact-reader", [Subject("User", ALICE.name)], namespace=TENANT_NS,
                   role_kind="Role", name="alice-reader")
    cp.policy.add_role(Role("get-only", (Rule(("get",), (GROUP,), ("modelartifacts",)),),
                            namespace=TENANT_NS))
    cp.policy.bind("get-only", [Subject("User", GETTER.name)], namespace=TENANT_NS,
                   role_kind="Role", name="getter")
    return chart


def _args(chart: chartrbac.Chart) -> list[str]:
    args = helm.expanded_args(helm.container(list(chart.docs), "Deployment", "apiserver"))
    return [a for a in args if a.partition("=")[0] not in CONTAINER_FLAGS]


def test_three_runs_through_the_aggregator_with_a_tenant(
        hub: fixturehub.Hub, tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        chart = _cluster(cp, hub)
        args = _args(chart)
        assert "--controllers=embedded" in args
        with clustermode.running(cp, tmp_path / "server", extra_args=[
                *args]) as server:
            api_service: dict[str, Any] = chart.one("APIService")["spec"]
            cp.register_api_service(api_service["group"], api_service["version"], server.url,
                                    server.ca_pem)
            admin = cp.write_kubeconfig(tmp_path / "admin.kubeconfig", token=ADMIN_TOKEN)
            alice = cp.write_kubeconfig(tmp_path / "alice.kubeconfig", token="alice-token")
            try:
                outcomes = _three_clean_runs(admin, alice, tmp_path)
            except AssertionError:
                print("--- server log\n" + server.log()[-15000:])
                raise
    # the control plane is v1.36, this machine's kubectl older: the skew is a note, not a failure
    version = outcomes["version.kubectl"]
    assert version["outcome"] == "pass"
    assert "version difference between client" in version["reason"], version
