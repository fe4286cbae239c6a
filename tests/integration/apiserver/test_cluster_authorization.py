"""Cluster mode authorization as tenants and components see it: SubjectAccessReview per request
(RBAC-scoped tenants, progress separate from get, copies and manifest in no tenant role), kube's
403 texts through the aggregator and to kubectl with a token checked by TokenReview, and the two
status guards."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import httpx
import orjson
import pytest

from devkit.controlplane import ControlPlane, UserInfo, service_account
from devkit.harness import aggregator, clustermode
from tests.integration.apiserver import cluster
from tests.support.kubectl import Kubectl

G = cluster.G
PROGRESS = G + "/namespaces/{ns}/modelartifacts/qwen/progress"
WORKER = UserInfo(clustermode.WORKER.name, groups=clustermode.WORKER.groups)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("cp")) as cp:
        clustermode.prepare(cp)
        cluster.grant_chart_and_tenants(cp)
        cp.add_token("alice-token", UserInfo("alice", uid="alice-uid", groups=("tenants",)))
        yield cp


@pytest.fixture(scope="module")
def server(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[clustermode.ClusterServer]:
    data_dir = tmp_path_factory.mktemp("server")
    cluster.seed_store(data_dir)
    with clustermode.running(plane, data_dir) as running:
        yield running


async def test_alice_reads_team_a_and_its_progress(server: clustermode.ClusterServer) -> None:
    async with server.aggregator() as agg:
        for path in (f"{G}/namespaces/team-a/modelartifacts",
                     f"{G}/namespaces/team-a/modelartifacts?watch=1&timeoutSeconds=1",
                     f"{G}/namespaces/team-a/modelartifacts/qwen",
                     PROGRESS.format(ns="team-a")):
            response = await agg.get(path, aggregator.ALICE, proxied=True)
            assert response.status_code == 200, (path, response.text)


@pytest.mark.parametrize(("path", "message"), [
    (f"{G}/namespaces/team-b/modelartifacts",
     'modelartifacts.worker.gpustack.ai is forbidden: User "alice" cannot list resource '
     '"modelartifacts" in API group "worker.gpustack.ai" in the namespace "team-b"'),
    (f"{G}/modelartifacts",
     'modelartifacts.worker.gpustack.ai is forbidden: User "alice" cannot list resource '
     '"modelartifacts" in API group "worker.gpustack.ai" at the cluster scope'),
    (f"{G}/modelartifacts?watch=true",
     'modelartifacts.worker.gpustack.ai is forbidden: User "alice" cannot watch resource '
     '"modelartifacts" in API group "worker.gpustack.ai" at the cluster scope'),
    (PROGRESS.format(ns="team-b"),
     'modelartifacts.worker.gpustack.ai "qwen" is forbidden: User "alice" cannot get resource '
     '"modelartifacts/progress" in API group "worker.gpustack.ai" in the namespace "team-b"'),
    # a tenant reader in its own namespace: progress (above) but never the per-node copies,
    # nor the manifest, each its own grant
    (PROGRESS.format(ns="team-a").replace("/progress", "/copies"),
     'modelartifacts.worker.gpustack.ai "qwen" is forbidden: User "alice" cannot get resource '
     '"modelartifacts/copies" in API group "worker.gpustack.ai" in the namespace "team-a"'),
    (PROGRESS.format(ns="team-a").replace("/progress", "/manifest"),
     'modelartifacts.worker.gpustack.ai "qwen" is forbidden: User "alice" cannot get resource '
     '"modelartifacts/manifest" in API group "worker.gpustack.ai" in the namespace "team-a"'),
    (f"{G}/nodemodelstores",
     'nodemodelstores.worker.gpustack.ai is forbidden: User "alice" cannot list resource '
     '"nodemodelstores" in API group "worker.gpustack.ai" at the cluster scope'),
])  # fmt: skip
async def test_alice_is_refused_elsewhere_with_kubes_text(server: clustermode.ClusterServer,
                                                          path: str, message: str) -> None:
    async with server.aggregator() as agg:
        response = await agg.get(path, aggregator.ALICE, proxied=True)
    assert response.status_code == 403
    assert response.json()["message"] == message
    assert response.json()["reason"] == "Forbidden"


async def test_get_modelartifacts_does_not_grant_progress(
        server: clustermode.ClusterServer) -> None:
    async with server.aggregator() as agg:
        item = await agg.get(f"{G}/namespaces/team-a/modelartifacts/qwen", cluster.GETTER)
        progress = await agg.get(PROGRESS.format(ns="team-a"), cluster.GETTER)
        listing = await agg.get(f"{G}/namespaces/team-a/modelartifacts", cluster.GETTER)
    assert item.status_code == 200
    assert progress.status_code == 403
    assert 'cannot get resource "modelartifacts/progress"' in progress.json()["message"]
    assert listing.status_code == 403


def test_kubectl_with_a_token_sees_the_same(server: clustermode.ClusterServer,
                                            tmp_path: pathlib.Path) -> None:
    kubectl = Kubectl(server.kubeconfig(tmp_path / "alice.kubeconfig", "alice-token"),
                      tmp_path / "cache")
    assert "qwen" in kubectl.run("get", "modelartifacts", "-n", "team-a").stdout
    refused = kubectl.fails("get", "modelartifacts", "-n", "team-b")
    assert ('Error from server (Forbidden): modelartifacts.worker.gpustack.ai is forbidden: '
            'User "alice" cannot list resource "modelartifacts" in API group '
            '"worker.gpustack.ai" in the namespace "team-b"') in refused
    unknown = Kubectl(server.kubeconfig(tmp_path / "bad.kubeconfig", "expired-or-garbage"),
                      tmp_path / "cache2")
    assert "You must be logged in to the server" in unknown.fails("get", "modelartifacts", "-n",
                                                                  "team-a")


# the status guards -------------------------------------------------------------------------

STATUS_PATCH = {"status": {"observedGeneration": 1}}
MERGE = [("Content-Type", "application/merge-patch+json")]


async def _patch_status(server: clustermode.ClusterServer, path: str,
                        user: UserInfo) -> httpx.Response:
    async with server.aggregator() as agg:
        return await agg.request("PATCH", path, user, headers=MERGE,
                                 content=orjson.dumps(STATUS_PATCH))


async def test_the_plugin_of_node_a_writes_a_and_is_refused_b(
        server: clustermode.ClusterServer) -> None:
    written = await _patch_status(server, f"{G}/nodemodelstores/node-a/status",
                                  aggregator.PLUGIN_A)
    assert written.status_code == 200, written.text
    assert written.json()["status"]["observedGeneration"] == 1
    assert written.json()["spec"]  # a status write keeps the spec
    refused = await _patch_status(server, f"{G}/nodemodelstores/node-b/status",
                                  aggregator.PLUGIN_A)
    assert refused.status_code == 403
    assert "refused by rule 3 (same node)" in refused.json()["message"]


async def test_without_node_name_the_pod_is_looked_up(server: clustermode.ClusterServer) -> None:
    pre_130 = service_account("gpustack-system", "model-manager-node", uid="sa-uid",
                              pod=cluster.PLUGIN_POD)  # a token without node-name (kube < 1.30)
    assert (await _patch_status(server, f"{G}/nodemodelstores/node-a/status",
                                pre_130)).status_code == 200
    refused = await _patch_status(server, f"{G}/nodemodelstores/node-b/status", pre_130)
    assert refused.status_code == 403 and "rule 3 (same node)" in refused.json()["message"]
    replaced = service_account("gpustack-system", "model-manager-node", uid="sa-uid",
                               pod=(cluster.PLUGIN_POD[0], "another-uid"))
    stale = await _patch_status(server, f"{G}/nodemodelstores/node-a/status", replaced)
    assert stale.status_code == 403 and "UID differs" in stale.json()["message"]


async def test_rules_1_and_2_refuse_others(server: clustermode.ClusterServer) -> None:
    unbound = service_account("gpustack-system", "model-manager-node", uid="sa-uid")
    for user, rule in ((aggregator.ADMIN, "rule 1 (plugin service account)"),
                       (unbound, "rule 2 (pod-bound token)")):
        refused = await _patch_status(server, f"{G}/nodemodelstores/node-a/status", user)
        assert refused.status_code == 403
        assert rule in refused.json()["message"]


async def test_only_the_learned_worker_writes_artifact_status(
        server: clustermode.ClusterServer) -> None:
    path = f"{G}/namespaces/team-a/modelartifacts/qwen/status"
    refused = await _patch_status(server, path, aggregator.ADMIN)  # system:masters too
    assert refused.status_code == 403
    assert "only the worker writes a ModelArtifact's status" in refused.json()["message"]
    written = await _patch_status(server, path, WORKER)
    assert written.status_code == 200, written.text
