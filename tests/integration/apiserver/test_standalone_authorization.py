"""Standalone authorization as a user sees it: real kubectl, impersonating tenants through the
admin's kubeconfig (``--as``/``--as-group`` and a kubeconfig with ``as``), gets the same answers
and the same 403 texts as behind a cluster's RBAC; the node-plugin identity of plugin.kubeconfig
writes its own node's NodeModelStore status and nothing else."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devkit.harness import apiserver as support
from tests.support import policies
from tests.support.kubectl import Kubectl

POLICY = policies.tenant_reader("team-a") + """---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: getter, namespace: team-a}
rules:
  - {apiGroups: [worker.gpustack.ai], resources: [modelartifacts], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: getter, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: getter}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: getters}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpustack-server}
roleRef:
  {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: model-manager-gpustack-server}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gpustack}]
"""
PROGRESS = "/apis/worker.gpustack.ai/v1/namespaces/{ns}/modelartifacts/qwen/progress"
COPIES = "/apis/worker.gpustack.ai/v1/namespaces/{ns}/modelartifacts/qwen/copies"


def _artifact(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": "qwen", "namespace": namespace},
            "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2.5-0.5B"}}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    data_dir = tmp_path_factory.mktemp("standalone-authz")
    (data_dir / "policy.yaml").write_text(POLICY)
    with support.running(data_dir, extra_args=["--plugin-node", "node-a",
                                               "--node", "node-a", "--node", "node-b",
                                               "--controllers=external"]) as running:
        for node in ("node-a", "node-b"):  # the server keeps one for each --node
            running.wait_for(f"/apis/worker.gpustack.ai/v1/nodemodelstores/{node}")
        with running.client() as http:
            for namespace in ("team-a", "team-b"):
                created = http.post(
                    f"/apis/worker.gpustack.ai/v1/namespaces/{namespace}/modelartifacts",
                    json=_artifact(namespace))
                assert created.status_code == 201, created.text
        yield running


def _kubectl(server: support.RunningServer, tmp: pathlib.Path,
             kubeconfig: pathlib.Path | None = None) -> Kubectl:
    return Kubectl(kubeconfig or server.kubeconfig, tmp / "cache")


def test_alice_reads_team_a_and_its_progress(server: support.RunningServer,
                                             tmp_path: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path)
    alice = ("--as", "alice", "--as-group", "tenants")
    listed = kubectl.run("get", "modelartifacts", "-n", "team-a", "-o", "name", *alice).stdout
    assert listed.split() == ["modelartifact.worker.gpustack.ai/qwen"]
    progress = yaml.safe_load(kubectl.run("get", "--raw", PROGRESS.format(ns="team-a"),
                                          *alice).stdout)
    assert progress["kind"] == "ModelArtifactProgress"


def test_a_tenant_reader_gets_progress_but_not_copies(server: support.RunningServer,
                                                      tmp_path: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path)
    alice = ("--as", "alice", "--as-group", "tenants")
    assert "ModelArtifactProgress" in kubectl.run("get", "--raw", PROGRESS.format(ns="team-a"),
                                                  *alice).stdout
    refused = kubectl.fails("get", "--raw", COPIES.format(ns="team-a"), *alice)
    assert 'User "alice" cannot get resource "modelartifacts/copies"' in refused
    assert kubectl.run("auth", "can-i", "get", "modelartifacts", "--subresource",
                                   "copies", "-n", "team-a", *alice,
                                   check=False).stdout.strip() == "no"


def test_the_admin_and_the_gpustack_server_get_copies(server: support.RunningServer,
                                                       tmp_path: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path)
    for who in ((), ("--as", "gpustack")):
        body = yaml.safe_load(kubectl.run("get", "--raw", COPIES.format(ns="team-b"),
                                          *who).stdout)
        assert body["kind"] == "ModelArtifactCopies" and body["nodes"] == []
        assert body["reason"]  # not resolved (no controllers here): says why there are no rows
    refused = kubectl.fails("delete", "nodemodelstore", "node-a", "--as", "gpustack")
    assert "cannot delete" in refused


def test_alice_is_refused_team_b_and_cluster_wide_lists(server: support.RunningServer,
                                                        tmp_path: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path)
    alice = ("--as", "alice", "--as-group", "tenants")
    other = kubectl.fails("get", "modelartifacts", "-n", "team-b", *alice)
    assert ('Error from server (Forbidden): modelartifacts.worker.gpustack.ai is forbidden: '
            'User "alice" cannot list resource "modelartifacts" in API group '
            '"worker.gpustack.ai" in the namespace "team-b"') in other
    everywhere = kubectl.fails("get", "modelartifacts", "-A", *alice)
    assert ('User "alice" cannot list resource "modelartifacts" in API group '
            '"worker.gpustack.ai" at the cluster scope') in everywhere
    progress = kubectl.fails("get", "--raw", PROGRESS.format(ns="team-b"), *alice)
    assert "forbidden" in progress.lower()
    writes = kubectl.fails("delete", "modelartifact", "qwen", "-n", "team-a", *alice)
    assert 'User "alice" cannot delete resource "modelartifacts"' in writes


def test_an_impersonating_kubeconfig_sees_the_same(server: support.RunningServer,
                                                   tmp_path: pathlib.Path) -> None:
    config = yaml.safe_load(server.kubeconfig.read_text())
    config["users"][0]["user"]["as"] = "alice"
    config["users"][0]["user"]["as-groups"] = ["tenants"]
    path = tmp_path / "alice.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    kubectl = _kubectl(server, tmp_path, path)
    assert "qwen" in kubectl.run("get", "mart", "-n", "team-a").stdout
    refused = kubectl.fails("get", "mart", "-n", "team-b")
    assert 'User "alice" cannot list resource "modelartifacts"' in refused


def test_get_modelartifacts_alone_does_not_grant_progress(server: support.RunningServer,
                                                          tmp_path: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path)
    bob = ("--as", "bob", "--as-group", "getters")
    assert "qwen" in kubectl.run("get", "modelartifact", "qwen", "-n", "team-a", *bob).stdout
    refused = kubectl.fails("get", "--raw", PROGRESS.format(ns="team-a"), *bob)
    assert "forbidden" in refused.lower()


def test_only_the_admin_may_impersonate(server: support.RunningServer,
                                        tmp_path: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path, server.worker_kubeconfig)
    refused = kubectl.fails("get", "--raw", PROGRESS.format(ns="team-a"), "--as", "admin")
    assert ('users "admin" is forbidden: User "system:serviceaccount:gpustack-system:'
            'model-manager-worker" cannot impersonate resource "users"') in refused


def _api(kubeconfig: pathlib.Path) -> Any:
    api_client = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), persist_config=False)
    return k8s.CustomObjectsApi(api_client)


def _status_patch(api: Any, node: str) -> Any:
    return api.patch_cluster_custom_object_status(
        "worker.gpustack.ai", "v1", "nodemodelstores", node,
        {"status": {"observedGeneration": 1, "models": []}})


def test_the_plugin_writes_its_own_node_only(server: support.RunningServer) -> None:
    plugin = _api(server.data_dir / "plugin.kubeconfig")
    written = _status_patch(plugin, "node-a")
    assert written["status"]["observedGeneration"] == 1
    assert written["spec"]  # spec untouched by a status write
    for kubeconfig, node, says in (
            # RBAC lets the plugin and the admin patch the status; the guard narrows it
            (server.data_dir / "plugin.kubeconfig", "node-b", "rule 3 (same node)"),
            (server.kubeconfig, "node-a", "rule 1 (plugin service account)"),
            # the worker's role does not even reach the guard
            (server.worker_kubeconfig, "node-a",
             'cannot patch resource \\"nodemodelstores/status\\"')):
        with pytest.raises(k8s.ApiException) as refused:
            _status_patch(_api(kubeconfig), node)
        assert refused.value.status == 403
        assert says in refused.value.body
    # the plugin reads artifacts (mount authorization) but cannot change them
    assert plugin.list_cluster_custom_object("worker.gpustack.ai", "v1", "modelartifacts")
    with pytest.raises(k8s.ApiException) as denied:
        plugin.delete_namespaced_custom_object("worker.gpustack.ai", "v1", "team-a",
                                               "modelartifacts", "qwen")
    assert denied.value.status == 403


def test_status_models_over_256_are_refused(server: support.RunningServer) -> None:
    plugin = _api(server.data_dir / "plugin.kubeconfig")
    models = [{"digest": "sha256:" + f"{i:064x}", "state": "Ready"} for i in range(257)]
    with pytest.raises(k8s.ApiException) as refused:
        plugin.patch_cluster_custom_object_status(
            "worker.gpustack.ai", "v1", "nodemodelstores", "node-a", {"status": {"models": models}})
    assert refused.value.status == 422
    assert "status.models" in refused.value.body


def test_only_the_worker_writes_artifact_status(server: support.RunningServer) -> None:
    for kubeconfig, says in (
            (server.kubeconfig, "only the worker writes a ModelArtifact's status"),
            (server.data_dir / "plugin.kubeconfig",
             'cannot patch resource \\"modelartifacts/status\\"')):
        with pytest.raises(k8s.ApiException) as refused:
            _api(kubeconfig).patch_namespaced_custom_object_status(
                "worker.gpustack.ai", "v1", "team-a", "modelartifacts", "qwen",
                {"status": {"observedGeneration": 1}})
        assert refused.value.status == 403
        assert says in refused.value.body
    written = _api(server.worker_kubeconfig).patch_namespaced_custom_object_status(
        "worker.gpustack.ai", "v1", "team-a", "modelartifacts", "qwen",
        {"status": {"observedGeneration": 1}})
    assert written["status"]["observedGeneration"] == 1
