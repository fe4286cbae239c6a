"""Cluster mode when kube-apiserver fails or is old: authorization fails closed, a failed
TokenReview is 401, the image-source floor follows /version, and the worker identity is learned
by TokenReview where SelfSubjectReview is not served, or known to be unknown."""

from __future__ import annotations

import pathlib

import orjson

from devkit.controlplane import ControlPlane, UserInfo
from devkit.harness import aggregator, clustermode
from tests.integration.apiserver import cluster

G = cluster.G
IMAGE = {"image": {"reference": "registry.example/models/qwen@sha256:" + "a" * 64}}


def _setup(cp: ControlPlane, data_dir: pathlib.Path) -> None:
    clustermode.prepare(cp)
    cluster.grant_chart_and_tenants(cp)
    cluster.seed_store(data_dir)


async def test_a_sar_outage_fails_closed_and_says_so(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        _setup(cp, tmp_path / "server")
        with clustermode.running(cp, tmp_path / "server") as server:
            sars = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
            async with server.aggregator() as agg:
                before = cp.recorder.count(sars, "POST")
                with cp.fail(f"POST {sars}", 503):
                    refused = await agg.get(f"{G}/namespaces/team-a/modelartifacts",
                                            aggregator.ALICE)
                # kube's backoff: five attempts on a server error, then fail closed
                assert cp.recorder.count(sars, "POST") - before == 5
                assert refused.status_code == 500
                assert refused.json()["reason"] == "InternalError"
                assert "could not be authorized" in refused.json()["message"]
                # nothing was cached: the same request passes once reviews work again
                allowed = await agg.get(f"{G}/namespaces/team-a/modelartifacts",
                                        aggregator.ALICE)
                assert allowed.status_code == 200
                # system:masters and health never needed a review
                with cp.fail("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", 503):
                    assert (await agg.get(G, aggregator.AVAILABILITY)).status_code == 200
            assert "SubjectAccessReview failed, refusing the request (fail closed)" in server.log()


async def test_a_tokenreview_outage_is_401_and_the_token_stays_secret(
        tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        _setup(cp, tmp_path / "server")
        cp.add_token("alice-secret-token", UserInfo("alice", groups=("tenants",)))
        with clustermode.running(cp, tmp_path / "server") as server:
            with server.client("alice-secret-token") as client:
                assert client.get(f"{G}/namespaces/team-a/modelartifacts").status_code == 200
            cp.remove_token("alice-secret-token")
            with (server.client("a-garbage-token") as client,
                  cp.fail("POST /apis/authentication.k8s.io/v1/tokenreviews", 500)):
                response = client.get(f"{G}/namespaces/team-a/modelartifacts")
            assert response.status_code == 401
            with server.client("a-garbage-token") as client:
                assert client.get(f"{G}/namespaces/team-a/modelartifacts").status_code == 401
            log = server.log()
            assert "TokenReview failed" in log
            assert "alice-secret-token" not in log and "a-garbage-token" not in log


async def _create_image(server: clustermode.ClusterServer) -> dict[str, object]:
    async with server.aggregator() as agg:
        response = await agg.request(
            "POST", f"{G}/namespaces/team-a/modelartifacts", aggregator.ADMIN,
            headers=[("Content-Type", "application/json")],
            content=orjson.dumps(cluster.artifact("img", "team-a", IMAGE)))
    return {"code": response.status_code, **response.json()}


async def test_the_image_floor_follows_the_clusters_version(tmp_path: pathlib.Path) -> None:
    for version, code, says in (("v1.34.3", 422, "this cluster's version is 1.34"),
                                ("v1.35.0", 201, "")):
        with ControlPlane(tmp_path / version, git_version=version) as cp:
            _setup(cp, tmp_path / f"server-{version}")
            with clustermode.running(cp, tmp_path / f"server-{version}") as server:
                answer = await _create_image(server)
        assert answer["code"] == code, answer
        if says:
            message = str(answer["message"])
            assert "image sources need Kubernetes 1.35 or later" in message and says in message
            assert "huggingFace, modelScope or persistentVolumeClaim" in message


async def test_an_unreadable_version_refuses_image_sources(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        _setup(cp, tmp_path / "server")
        with (cp.fail("GET /version", 500),
              clustermode.running(cp, tmp_path / "server") as server):
            answer = await _create_image(server)
            hub = cluster.artifact("hub", "team-a")
            async with server.aggregator() as agg:
                created = await agg.request(
                    "POST", f"{G}/namespaces/team-a/modelartifacts", aggregator.ADMIN,
                    headers=[("Content-Type", "application/json")],
                    content=orjson.dumps(hub))
    assert answer["code"] == 422
    assert "version could not be read" in str(answer["message"])
    assert created.status_code == 201  # other sources do not depend on the version


async def test_the_worker_is_learned_by_tokenreview_without_ssr(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp", serve_selfsubjectreview=False,
                      git_version="v1.27.9") as cp:
        _setup(cp, tmp_path / "server")
        with clustermode.running(cp, tmp_path / "server") as server:
            async with server.aggregator() as agg:
                written = await agg.request(
                    "PATCH", f"{G}/namespaces/team-a/modelartifacts/qwen/status",
                    UserInfo(clustermode.WORKER.name, groups=clustermode.WORKER.groups),
                    headers=[("Content-Type", "application/merge-patch+json")],
                    content=b'{"status":{"observedGeneration":1}}')
            assert written.status_code == 200, written.text
            assert "(TokenReview of its own token)" in server.log()


async def test_with_neither_the_worker_identity_is_unknown(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp", serve_selfsubjectreview=False) as cp:
        _setup(cp, tmp_path / "server")
        certificate = cp.issue_client_cert(clustermode.WORKER.name, ["system:serviceaccounts"])
        with clustermode.running(cp, tmp_path / "server", token=None,
                                 client=certificate) as server:
            async with server.aggregator() as agg:
                refused = await agg.request(
                    "PATCH", f"{G}/namespaces/team-a/modelartifacts/qwen/status",
                    UserInfo(clustermode.WORKER.name, groups=clustermode.WORKER.groups),
                    headers=[("Content-Type", "application/merge-patch+json")],
                    content=b'{"status":{"observedGeneration":1}}')
            log = server.log()
    assert refused.status_code == 403
    message = refused.json()["message"]
    assert "the worker identity is unknown" in message
    assert "does not serve SelfSubjectReview" in message and "not a bearer token" in message
    assert "worker identity unknown (attempt 1; the controllers wait): kube-apiserver does " \
        "not serve SelfSubjectReview" in log


async def test_a_worker_user_that_is_not_the_servers_identity(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        _setup(cp, tmp_path / "server")
        args = ["--worker-user", "system:serviceaccount:gpustack-system:someone-else"]
        with clustermode.running(cp, tmp_path / "server", extra_args=args) as server:
            async with server.aggregator() as agg:
                refused = await agg.request(
                    "PATCH", f"{G}/namespaces/team-a/modelartifacts/qwen/status",
                    UserInfo(clustermode.WORKER.name, groups=clustermode.WORKER.groups),
                    headers=[("Content-Type", "application/merge-patch+json")],
                    content=b'{"status":{"observedGeneration":1}}')
    assert refused.status_code == 403
    assert "but --worker-user says" in refused.json()["message"]
