"""Real kubectl against the fixture control plane: discovery, get (tables fall back to the
plain list), watch, and kube's refusal texts. (``kubectl auth can-i``/``whoami`` post protobuf,
which the fixture does not speak: it answers 415 like a JSON-only server.)"""

from __future__ import annotations

import json
import pathlib

from devkit.controlplane import ADMIN_TOKEN, ControlPlane, resources
from tests.integration.controlplane import samples
from tests.support.kubectl import Kubectl


def _kubectl(cp: ControlPlane, tmp_path: pathlib.Path, token: str) -> Kubectl:
    config = cp.write_kubeconfig(tmp_path / f"{token}.kubeconfig", token=token)
    return Kubectl(config, tmp_path / "cache")


def test_kubectl_reads_pods_and_configmaps(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    control_plane.seed(resources.PODS, samples.load("pod-bound-to-node.json"))
    kubectl = _kubectl(control_plane, tmp_path, ADMIN_TOKEN)
    assert kubectl.run("get", "pods", "-A", "-o", "name").stdout.split() == ["pod/plugin-a"]
    listed = json.loads(kubectl.run("get", "pods", "-n", "gpustack-system", "-o", "json").stdout)
    assert listed["items"][0]["spec"]["nodeName"] == "node-a"
    names = kubectl.run("get", "cm", "-n", "kube-system", "-o", "name").stdout.split()
    assert names == ["configmap/extension-apiserver-authentication"]
    selected = kubectl.run(
        "get", "pods", "-A", "--field-selector", "spec.nodeName=node-b", "-o", "name"
    )
    assert selected.stdout.strip() == ""
    version = json.loads(kubectl.run("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.36.2"


def test_kubectl_shows_kubes_refusals(control_plane: ControlPlane, tmp_path: pathlib.Path) -> None:
    samples.recorded_cluster(control_plane)
    alice = _kubectl(control_plane, tmp_path, samples.ALICE_TOKEN)
    refused = alice.fails("get", "configmaps", "-n", "team-b")
    assert (
        'Error from server (Forbidden): configmaps is forbidden: User "alice" cannot list '
        'resource "configmaps" in API group "" in the namespace "team-b"'
    ) in refused
    stranger = _kubectl(control_plane, tmp_path, "unknown-token")
    assert "Unauthorized" in stranger.fails("get", "pods")


def test_kubectl_watch_sees_a_new_object(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    kubectl = _kubectl(control_plane, tmp_path, ADMIN_TOKEN)
    with kubectl.stream("get", "leases", "-n", "kube-system", "-w", "-o", "name") as stream:
        control_plane.seed(resources.LEASES, samples.load("lease.json"))
        stream.wait_for("lease.coordination.k8s.io/apiserver-wlv32tlttr4jl3gtroqexyxapa")
