"""``--controllers=external``: the controllers as their own processes (``python -m controllers``),
writing status over HTTP through the worker-only ``/status`` path; and leader election between
two such replicas over one API server (one store), their Lease on the fixture control plane
(the cluster's Lease path; ``test_replicas_leader`` covers two API servers on one etcd, whose
Lease is kept in the store).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from controllers import assembly
from devkit import fixturehub
from devkit.controlplane import ControlPlane, Rule, UserInfo, resources
from devkit.harness import apiserver as support
from tests.support import kubectl, pools

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
TOKEN = "hf_external_token_7"
WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {"config.json": b"{}", "w.safetensors": 4096}


class Controllers:
    """A ``python -m controllers`` process with its log."""

    def __init__(self, base: pathlib.Path, name: str, args: list[str]) -> None:
        self.log_file = base / f"{name}.log"
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "controllers", "--log-level", "DEBUG", *args],
                cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _wait(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _artifact(name: str, repo: str, secret: str | None = None) -> str:
    ref = f"\n      secretRef: {{name: {secret}}}" if secret else ""
    return (f"apiVersion: worker.gpustack.ai/v1\nkind: ModelArtifact\nmetadata:\n"
            f"  name: {name}\n  namespace: team-a\nspec:\n  source:\n    huggingFace:\n"
            f"      repository: {repo}{ref}\n")


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        yield running


@pytest.fixture
def started() -> Iterator[list[Controllers]]:
    processes: list[Controllers] = []
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()


def test_external_controllers_write_status_as_the_worker_only(
        hub: fixturehub.Hub, tmp_path: pathlib.Path, started: list[Controllers]) -> None:
    hub.add_repo("org/private", FILES, private_token=TOKEN)
    secrets_dir = tmp_path / "secrets"
    (secrets_dir / "team-a" / "hf").mkdir(parents=True)
    (secrets_dir / "team-a" / "hf" / "token").write_text(TOKEN)
    with support.running(tmp_path / "api", extra_args=["--controllers=external"]) as server:
        ctl = kubectl.Kubectl(server.kubeconfig, tmp_path / "cache")
        ctl.run("apply", "-f", "-", stdin=_artifact("m", "org/private", "hf"))
        common = ["--secrets-dir", str(secrets_dir), "--huggingface-endpoint", hub.endpoint]
        # the admin is not the worker: its status writes are refused, nothing is resolved
        intruder = Controllers(tmp_path, "admin", ["--kubeconfig", str(server.kubeconfig),
                                                   *common])
        started.append(intruder)
        _wait("the refusal", lambda: "only the worker writes" in intruder.log())
        assert ctl.run("get", "mart", "m", "-n", "team-a", "-o",
                       "jsonpath={.status}").stdout == ""
        intruder.stop()
        worker = Controllers(tmp_path, "worker", ["--kubeconfig",
                                                  str(server.worker_kubeconfig), *common])
        started.append(worker)
        ctl.run("wait", "--for=condition=Resolved", "mart/m", "-n", "team-a", "--timeout=60s")
        status = json.loads(ctl.run("get", "mart", "m", "-n", "team-a", "-o", "json").stdout)
        assert status["status"]["resolved"]["revision"] == hub.repo("org/private").commit
        worker.stop()
        assert worker.process.returncode == 0, worker.log()[-3000:]
        assert TOKEN not in worker.log() and TOKEN not in server.log()


def test_leader_election_between_two_replicas(
        hub: fixturehub.Hub, tmp_path: pathlib.Path, started: list[Controllers]) -> None:
    with ControlPlane(tmp_path / "cp", namespaces=("gpustack-system", "team-a")) as cp:
        cp.add_token("worker-token", UserInfo(WORKER, uid="w"))
        # the worker's rules in a cluster (the chart's): the prefetches' status and delivery
        # run here too, so Nodes, Pods (the plugin Pods, the warm-up Pods) and the plugin's
        # DaemonSets are read
        cp.policy.grant(WORKER, [Rule(("get", "list", "watch"), ("",),
                                      ("secrets", "persistentvolumeclaims", "configmaps",
                                       "nodes", "pods")),
                                 Rule(("create", "delete"), ("",), ("pods",)),
                                 Rule(("list", "watch"), ("apps",), ("daemonsets",)),
                                 Rule(("get", "create", "update"), ("coordination.k8s.io",),
                                      ("leases",))])
        cluster = cp.write_kubeconfig(tmp_path / "cluster.kubeconfig", token="worker-token")
        cp.seed(resources.SECRETS, {"metadata": {"name": "hf", "namespace": "team-a"},
                                    "data": {"token": base64.b64encode(TOKEN.encode()).decode()}})
        for i in range(6):
            hub.add_repo(f"org/m{i}", FILES, private_token=TOKEN)
        with support.running(tmp_path / "api", extra_args=["--controllers=external"]) as server:
            ctl = kubectl.Kubectl(server.kubeconfig, tmp_path / "cache")
            args = ["--kubeconfig", str(server.worker_kubeconfig), "--cluster-kubeconfig",
                    str(cluster), "--huggingface-endpoint", hub.endpoint, "--leader-elect",
                    "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline",
                    "3s", "--leader-elect-retry-period", "500ms"]
            first = Controllers(tmp_path, "first", args)
            started.append(first)
            _wait("a leader", lambda: "acquired lease" in first.log())
            second = Controllers(tmp_path, "second", args)
            started.append(second)
            for i in range(3):
                ctl.run("apply", "-f", "-", stdin=_artifact(f"m{i}", f"org/m{i}", "hf"))
            for i in range(3):
                ctl.run("wait", "--for=condition=Resolved", f"mart/m{i}", "-n", "team-a",
                        "--timeout=60s")
            assert "acquired lease" not in second.log()  # passive while the first leads
            lease = cp.get(resources.LEASES, "model-manager-controllers", "gpustack-system")
            assert lease is not None and lease["spec"]["holderIdentity"].startswith(
                os.uname().nodename)
            first.kill()  # no release: the second must wait out the lease
            held = cp.get(resources.LEASES, "model-manager-controllers", "gpustack-system")
            assert held is not None
            for i in range(3, 6):
                ctl.run("apply", "-f", "-", stdin=_artifact(f"m{i}", f"org/m{i}", "hf"))
            _wait("the take-over", lambda: "acquired lease" in second.log(), timeout=30)
            taken = cp.get(resources.LEASES, "model-manager-controllers", "gpustack-system")
            assert taken is not None and taken["spec"]["leaseTransitions"] == 1
            assert taken["spec"]["holderIdentity"] != held["spec"]["holderIdentity"]
            # the take-over came a whole lease duration after the dead leader's last renewal
            gap = (_time(taken["spec"]["acquireTime"])
                   - _time(held["spec"]["renewTime"])).total_seconds()
            assert gap >= 4 - 1  # (renewTime may be written to the second)
            for i in range(3, 6):
                ctl.run("wait", "--for=condition=Resolved", f"mart/m{i}", "-n", "team-a",
                        "--timeout=60s")
            # every artifact was resolved once: one revision lookup each, by one replica
            for i in range(6):
                assert hub.requests(f"/api/models/org/m{i}/revision/main") == 1, i
            second.stop()


GROUP = "/apis/worker.gpustack.ai/v1"


def _started(log: str, marker: str) -> set[str]:
    """The controllers a process logged it runs (``assembly.build``'s line)."""
    line = _wait(marker, lambda: next((x for x in log.splitlines() if marker in x), ""))
    return set(line.split(marker, 1)[1].strip().split(", "))


def test_the_external_process_and_the_servers_part_are_the_embedded_set(
        hub: fixturehub.Hub, tmp_path: pathlib.Path, started: list[Controllers]) -> None:
    """``--controllers=external``: ``python -m controllers`` runs every controller that writes
    over HTTP (a ModelPrefetch's status here), the server the ones that need its in-process
    client (the node store, ``spec.pinned``); together, exactly the embedded set."""
    hub.add_repo("org/prefetched", FILES)
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    with support.running(tmp_path / "api", extra_args=["--controllers=external",
                                                       "--node", "node-1"]) as server:
        server.wait_for(f"{GROUP}/nodemodelstores/node-1")  # the server's part: node stores
        worker = Controllers(tmp_path, "worker", [
            "--kubeconfig", str(server.worker_kubeconfig), "--secrets-dir", str(secrets_dir),
            "--huggingface-endpoint", hub.endpoint])
        started.append(worker)
        ctl = kubectl.Kubectl(server.kubeconfig, tmp_path / "cache")
        ctl.run("apply", "-f", "-", stdin=_artifact("m", "org/prefetched"))
        ctl.run("wait", "--for=condition=Resolved", "mart/m", "-n", "team-a", "--timeout=60s")
        digest = json.loads(ctl.run("get", "mart", "m", "-n", "team-a", "-o", "json").stdout)[
            "status"]["resolved"]["manifestDigest"]
        with server.client() as admin:
            pools.setup(admin, "team-a", ["node-1"])  # merged by the server's part
        # the shape before the pool layer, as an old client writes it: converted on write
        ctl.run("apply", "-f", "-", stdin=(
            "apiVersion: worker.gpustack.ai/v1\nkind: ModelPrefetch\nmetadata:\n  name: warm\n"
            "  namespace: team-a\nspec:\n  artifactRef: {name: m}\n  bindingRef: {name: grant}\n"
            "  retention: {pinned: true}\n  targets: {nodeNames: [node-1]}\n"))
        with server.client() as admin:
            # the pin: written by the server's part (only its in-process client may)
            _wait("the pin", lambda: (admin.get(f"{GROUP}/nodemodelstores/node-1").json()
                                      .get("spec") or {}).get("pinned") == [digest])

            # the status: written by python -m controllers over HTTP
            def counted() -> bool:
                found = admin.get(f"{GROUP}/namespaces/team-a/modelprefetches/warm").json()
                return (found.get("status") or {}).get("desiredNodes") == 1

            _wait("the prefetch's status", counted)
            # the ModelStore's status: written by python -m controllers too
            _wait("the store's status", lambda: (admin.get(f"{GROUP}/modelstores/all-nodes")
                                                  .json().get("status") or {}).get("nodes") == 1)
        ours = _started(worker.log(), "controllers (process):")
        theirs = _started(server.log(), "controllers (external):")
        assert ours == {"resolver", "prefetches", "nodestores.pools", "bindings", "warmgate"}
        assert theirs == {"nodestores", "prefetches.pins"}
        assert not ours & theirs
        embedded = {r.name for r in assembly.selected(assembly.Mode.EMBEDDED)}
        assert ours | theirs == embedded
        worker.stop()
        assert worker.process.returncode == 0, worker.log()[-3000:]
