"""``GET /model/downloads`` in a cluster: the caller's token is reviewed by kube-apiserver (the
fixture control plane's TokenReview) for the plugins' own audience, and only the worker identity
reads the downloads, with its token for that audience (its API token is refused)."""

from __future__ import annotations

import pathlib

import httpx
import pytest
from prometheus_client import registry

import kube
from devkit import clock as clocks
from devkit.controlplane import API_AUDIENCE, ControlPlane, Rule, resources, service_account
from nodeplugin import metrics, reviews, serve
from nodeplugin.materialize import interface
from nodeplugin.nodestore import source
from openapi import plugin as plugin_api

DIGEST = "sha256:" + "0f" * 32
WORKER = "system:serviceaccount:gpustack-system:model-manager"
PLUGIN_TOKEN = "plugin-sa-token"
WORKER_TOKEN = "worker-plugin-audience-token"
WORKER_API_TOKEN = "worker-sa-api-token"
TENANT_TOKEN = "tenant-sa-token"


def _registry() -> registry.CollectorRegistry:
    sources = metrics.Sources(downloaded_bytes=lambda: 0, mounts=lambda: {},
                              stored_bytes=lambda: 0, capacity_bytes=lambda: 0)
    return metrics.Metrics(sources).registry


@pytest.fixture
def plane(control_plane: ControlPlane) -> ControlPlane:
    control_plane.add_token(PLUGIN_TOKEN, service_account(
        "gpustack-system", "model-manager-plugin", uid="plugin-uid"))
    worker = service_account("gpustack-system", "model-manager", uid="worker-uid")
    control_plane.add_token(WORKER_TOKEN, worker, audiences=[plugin_api.AUDIENCE])
    control_plane.add_token(WORKER_API_TOKEN, worker, audiences=[API_AUDIENCE])
    # a tenant may get a token of its own for any audience (TokenRequest): RBAC refuses it
    control_plane.add_token(TENANT_TOKEN, service_account("team-a", "default", uid="t-uid"),
                            audiences=[plugin_api.AUDIENCE])
    control_plane.policy.grant("system:serviceaccount:gpustack-system:model-manager-plugin",
                               Rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)))
    return control_plane


async def test_only_the_worker_identity_reads_the_downloads(
    plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    clock = clocks.ManualClock()
    config = plane.write_kubeconfig(tmp_path / "plugin.kubeconfig", token=PLUGIN_TOKEN)
    async with kube.Client.from_kubeconfig(config) as client:
        reviewer = reviews.worker_calls(client, clock)
        running = [interface.Progress(DIGEST, interface.State.DOWNLOADING, 5, 10)]
        app = serve.make_app(metrics=_registry(), ready=lambda: None, running=lambda: running,
                             token_file=None, reviewer=reviewer, worker_user=WORKER)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="https://plugin") as http:

            async def get(token: str | None) -> httpx.Response:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                return await http.get("/model/downloads", headers=headers)

            ok = await get(WORKER_TOKEN)
            assert ok.status_code == 200
            assert ok.json()["downloads"][0] == {"digest": DIGEST, "downloadedBytes": 5,
                                                 "sizeBytes": 10, "source": "Hub"}
            tenant = await get(TENANT_TOKEN)
            assert tenant.status_code == 403 and "team-a:default" in tenant.json()["message"]
            stranger = await get("made-up-token")
            assert stranger.status_code == 401
            assert (await get(None)).status_code == 401
            # the worker's token for kube-apiserver is refused: it is never for a plugin
            api_token = await get(WORKER_API_TOKEN)
            assert api_token.status_code == 401
            assert plugin_api.AUDIENCE in api_token.json()["message"]
            for answer in (ok, tenant, stranger, api_token):
                assert WORKER_TOKEN not in answer.text and TENANT_TOKEN not in answer.text
                assert WORKER_API_TOKEN not in answer.text
            asked = plane.recorder.requests("/tokenreviews", "POST")
            assert {tuple(r.body["spec"]["audiences"]) for r in asked} == {
                (plugin_api.AUDIENCE,)}
            reviewed = len(asked)
            assert reviewed == 4
            assert (await get(WORKER_TOKEN)).status_code == 200  # answered from the cache
            assert plane.recorder.count("/tokenreviews", "POST") == reviewed
            clock.advance(reviews.TTL_SECONDS)
            assert (await get(WORKER_TOKEN)).status_code == 200  # reviewed again
            assert plane.recorder.count("/tokenreviews", "POST") == reviewed + 1
            clock.advance(reviews.TTL_SECONDS)
            with plane.fail(r"tokenreviews", 503, "etcd is down"):
                down = await get(WORKER_TOKEN)
            assert down.status_code == 503 and "cannot check the token now" in down.text


async def test_without_a_worker_user_nobody_reads_the_downloads(
    plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    config = plane.write_kubeconfig(tmp_path / "plugin.kubeconfig", token=PLUGIN_TOKEN)
    async with kube.Client.from_kubeconfig(config) as client:
        app = serve.make_app(metrics=_registry(), ready=lambda: None, running=lambda: [],
                             token_file=None,
                             reviewer=reviews.TokenReviewer(client, clock=clocks.ManualClock()))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="https://plugin") as http:
            answer = await http.get("/model/downloads",
                                    headers={"Authorization": f"Bearer {WORKER_TOKEN}"})
    assert answer.status_code == 403 and "--worker-user" in answer.json()["message"]
    assert plane.recorder.count("/tokenreviews", "POST") == 0


async def test_in_a_pod_the_plugin_uses_its_projected_token_and_follows_its_rotation(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """The plugin's in-cluster identity (``kube.Client`` from the service-account directory):
    its CA ConfigMap read and its TokenReviews go out with the projected token, and with the
    new one once kubelet rotates it."""
    token, user, _ = control_plane.plugin_pod("node-a")
    control_plane.policy.grant(user.name, [
        Rule(("get", "list", "watch"), ("",), ("configmaps",)),
        Rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
    ])  # fmt: skip
    control_plane.seed(resources.CONFIGMAPS, {
        "metadata": {"name": "hub-ca", "namespace": "gpustack-system"},
        "data": {"ca.crt": "PEM"}})  # fmt: skip
    control_plane.add_token(WORKER_TOKEN, service_account(
        "gpustack-system", "model-manager", uid="worker-uid"))
    directory = tmp_path / "serviceaccount"
    env = control_plane.write_service_account(directory, token)
    clock = clocks.ManualClock()
    async with kube.Client.in_cluster(env=env, service_account_dir=directory) as client:
        api = source.KubeStoreApi(client)
        reviewer = reviews.TokenReviewer(client, clock=clock)
        found, _ = await api.list_config_map("gpustack-system", "hub-ca")
        assert found is not None and found["data"] == {"ca.crt": "PEM"}
        assert await reviewer.user_of(WORKER_TOKEN) == WORKER
        # kubelet rotates the token; the old one stops working.
        control_plane.add_token("rotated-token", user)
        control_plane.remove_token(token)
        control_plane.write_service_account(directory, "rotated-token")
        clock.advance(reviews.TTL_SECONDS)
        found, _ = await api.list_config_map("gpustack-system", "hub-ca")
        assert found is not None
        assert await reviewer.user_of(WORKER_TOKEN) == WORKER
    seen = control_plane.recorder.requests("/configmaps", "GET")
    assert [r.user for r in seen] == [user.name, user.name]
    assert all(r.code == 200 for r in seen)


async def test_a_review_names_the_pod_or_node_a_token_is_bound_to(
    plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """One ServiceAccount, three holders: the Pod a projected token is bound to, else its node,
    else the user alone (what the peer port counts one caller's answers by)."""
    user = "system:serviceaccount:gpustack-system:model-manager-node"
    plane.add_token("pod-bound", service_account(
        "gpustack-system", "model-manager-node", uid="n-uid", pod=("node-x1", "pod-uid-1"),
        node=("node-a", "node-uid-a")))
    plane.add_token("node-bound", service_account(
        "gpustack-system", "model-manager-node", uid="n-uid", node=("node-b", "node-uid-b")))
    plane.add_token("unbound", service_account("gpustack-system", "model-manager-node",
                                               uid="n-uid"))
    config = plane.write_kubeconfig(tmp_path / "plugin.kubeconfig", token=PLUGIN_TOKEN)
    async with kube.Client.from_kubeconfig(config) as client:
        reviewer = reviews.TokenReviewer(client, clock=clocks.ManualClock())
        pod = await reviewer.identity_of("pod-bound")
        node = await reviewer.identity_of("node-bound")
        plain = await reviewer.identity_of("unbound")
        assert await reviewer.identity_of("no-such-token") is None
    assert pod == reviews.Identity(user, "pod:pod-uid-1")
    assert node == reviews.Identity(user, "node:node-b")
    assert plain == reviews.Identity(user) and plain.key == user
    assert len({pod.key, node.key, plain.key}) == 3
