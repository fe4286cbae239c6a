"""The anchor grant in cluster mode (issue 35): the fixture control plane holds the chart's
rendered RBAC; an administrator binds alice to the chart's tenant editor role in team-a, and ops
to it in team-a and team-c and to the chart's ``model-manager-anchor-granter`` in team-c only.
Through the aggregator, the server asks kube-apiserver a SubjectAccessReview with verb
``anchor`` for the requester when a write sets the annotation ``worker.gpustack.ai/anchor-grant``:
alice (tenant editor) is refused with kube's 403 and the rule, at creation and by a patch, and
still creates an artifact with ``expectedDigest``; ops grants in team-c (the server records
``status.anchorGrant``) and not in team-a."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devkit import chartrbac
from devkit.controlplane import ControlPlane, Subject, UserInfo
from devkit.harness import aggregator, clustermode
from tests.integration.apiserver import cluster

G = cluster.G
GRANT = "worker.gpustack.ai/anchor-grant"
DIGEST = "sha256:" + "cd" * 32
OPS = UserInfo("ops", uid="ops-uid", groups=("system:authenticated",))
MERGE = [("Content-Type", "application/merge-patch+json")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[clustermode.ClusterServer]:
    with ControlPlane(tmp_path_factory.mktemp("cp"),
                      namespaces=("team-a", "team-c")) as cp:
        clustermode.prepare(cp)
        chartrbac.render().apply(cp)
        cp.policy.bind("model-manager-tenant-editor", [aggregator.ALICE.name],
                       namespace="team-a", name="alice-editor")
        for namespace in ("team-a", "team-c"):
            cp.policy.bind("model-manager-tenant-editor", [Subject("User", "ops")],
                           namespace=namespace, name="ops-editor")
        cp.policy.bind("model-manager-anchor-granter", [Subject("User", "ops")],
                       namespace="team-c", name="ops-import")
        data_dir = tmp_path_factory.mktemp("server")
        cluster.seed_store(data_dir)
        with clustermode.running(cp, data_dir) as running:
            yield running


def _artifact(name: str, namespace: str, annotations: dict[str, str] | None = None
              ) -> dict[str, Any]:
    obj = cluster.artifact(name, namespace)
    obj["spec"]["expectedDigest"] = DIGEST
    if annotations is not None:
        obj["metadata"]["annotations"] = annotations
    return obj


def _anchor_reviews(server: clustermode.ClusterServer) -> list[tuple[str, str, str]]:
    """(user, namespace, name) of every SubjectAccessReview with verb anchor the server sent."""
    found = []
    for entry in server.controlplane.recorder.requests():
        spec = (entry.body or {}).get("spec") or {}
        attributes = spec.get("resourceAttributes") or {}
        if entry.path.endswith("/subjectaccessreviews") and attributes.get("verb") == "anchor":
            assert (attributes["group"], attributes["resource"]) == (
                "worker.gpustack.ai", "modelartifacts")
            found.append((spec["user"], attributes["namespace"], attributes["name"]))
    return found


async def test_a_tenant_editor_cannot_grant_an_anchor(server: clustermode.ClusterServer) -> None:
    async with server.aggregator() as agg:
        refused = await agg.request("POST", f"{G}/namespaces/team-a/modelartifacts",
                                    aggregator.ALICE, proxied=True,
                                    json=_artifact("steal", "team-a", {GRANT: "mine"}))
        assert refused.status_code == 403, refused.text
        assert refused.json()["message"].startswith(
            'modelartifacts.worker.gpustack.ai "steal" is forbidden: User "alice" cannot anchor '
            'resource "modelartifacts" in API group "worker.gpustack.ai" in the namespace '
            '"team-a": rule AnchorGrant: the annotation worker.gpustack.ai/anchor-grant')
        created = await agg.request("POST", f"{G}/namespaces/team-a/modelartifacts",
                                    aggregator.ALICE, proxied=True,
                                    json=_artifact("steal", "team-a"))
        assert created.status_code == 201, created.text
        patched = await agg.request(
            "PATCH", f"{G}/namespaces/team-a/modelartifacts/steal", aggregator.ALICE,
            proxied=True, headers=MERGE, json={"metadata": {"annotations": {GRANT: "mine"}}})
        assert patched.status_code == 403, patched.text
        assert "rule AnchorGrant" in patched.json()["message"]
    assert ("alice", "team-a", "steal") in _anchor_reviews(server)


async def test_the_granter_role_grants_where_it_is_bound(
        server: clustermode.ClusterServer) -> None:
    async with server.aggregator() as agg:
        granted = await agg.request("POST", f"{G}/namespaces/team-c/modelartifacts", OPS,
                                    proxied=True,
                                    json=_artifact("imported", "team-c", {GRANT: "ops, OPS-42"}))
        assert granted.status_code == 201, granted.text
        assert set(granted.json()["status"]["anchorGrant"]) == {"grantedTime"}
        elsewhere = await agg.request(
            "PATCH", f"{G}/namespaces/team-a/modelartifacts/qwen", OPS, proxied=True,
            headers=MERGE, json={"metadata": {"annotations": {GRANT: "ops"}}})
        assert elsewhere.status_code == 403, elsewhere.text  # an editor there, no granter
        assert "rule AnchorGrant" in elsewhere.json()["message"]
    assert ("ops", "team-c", "imported") in _anchor_reviews(server)
