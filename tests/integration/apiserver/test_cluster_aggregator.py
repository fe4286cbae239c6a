"""The aggregator's path for real: the front-proxy certificate and X-Remote-* headers over HTTP/2
and HTTP/1.1, with the trust read from and watched in extension-apiserver-authentication."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import httpx
import pytest

from devkit.controlplane import ControlPlane, FrontProxy
from devkit.harness import aggregator, clustermode
from tests.integration.apiserver import cluster

PROTOCOLS = [pytest.param(True, id="h2"), pytest.param(False, id="http1.1")]
LIST_A = f"{cluster.G}/namespaces/team-a/modelartifacts"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("cp")) as cp:
        clustermode.prepare(cp)
        cluster.grant_chart_and_tenants(cp)
        yield cp


@pytest.fixture(scope="module")
def server(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[clustermode.ClusterServer]:
    data_dir = tmp_path_factory.mktemp("server")
    cluster.seed_store(data_dir)
    with clustermode.running(plane, data_dir) as running:
        yield running


@pytest.mark.parametrize("http2", PROTOCOLS)
async def test_the_aggregators_own_requests_pass(server: clustermode.ClusterServer,
                                                 http2: bool) -> None:
    async with server.aggregator(http2=http2) as agg:
        available = await agg.get(cluster.G, aggregator.AVAILABILITY)
        assert available.status_code == 200 and available.json()["kind"] == "APIResourceList"
        assert available.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
        discovery = await agg.get("/apis", aggregator.AGGREGATED_DISCOVERY,
                                  accept=aggregator.DISCOVERY_V2_ACCEPT)
        assert discovery.status_code == 200
        assert discovery.json()["kind"] == "APIGroupDiscoveryList"
        # group-less identities pass through system:discovery (system:authenticated added)
        legacy = await agg.get(cluster.G, aggregator.LEGACY_DISCOVERY, accept="application/json")
        assert legacy.status_code == 200
        for path in ("/openapi/v2", "/openapi/v3", "/openapi/v3/apis/worker.gpustack.ai/v1"):
            document = await agg.get(path, aggregator.OPENAPI, accept="application/json")
            assert document.status_code == 200, (path, document.text)


async def test_the_review_carries_the_forwarded_identity(server: clustermode.ClusterServer,
                                                         plane: ControlPlane) -> None:
    plane.recorder.clear()
    async with server.aggregator() as agg:
        group = await agg.get("/apis/worker.gpustack.ai", aggregator.LEGACY_DISCOVERY)
        assert group.status_code == 200
        assert (await agg.get(f"{LIST_A}?limit=1", aggregator.ALICE)).status_code == 200
    reviews = [r.body for r in plane.recorder.requests(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews", "POST")]
    specs = [body["spec"] for body in reviews if isinstance(body, dict)]
    assert {"nonResourceAttributes": {"path": "/apis/worker.gpustack.ai", "verb": "get"},
            "user": "system:kube-aggregator", "groups": ["system:authenticated"]} in specs
    # no uid: this ConfigMap names no requestheader-uid-headers, so X-Remote-Uid is not read
    assert {"resourceAttributes": {"namespace": "team-a", "verb": "list",
                                   "group": "worker.gpustack.ai", "version": "v1",
                                   "resource": "modelartifacts"},
            "user": "alice", "groups": ["tenants", "system:authenticated"]} in specs


@pytest.mark.parametrize("http2", PROTOCOLS)
async def test_headers_without_the_certificate_are_anonymous(
        server: clustermode.ClusterServer, http2: bool) -> None:
    async with server.aggregator(http2=http2, certificate=None) as impostor:
        response = await impostor.get(LIST_A, aggregator.ADMIN)
    assert response.status_code == 403
    assert 'User "system:anonymous" cannot list resource "modelartifacts"' in (
        response.json()["message"])


@pytest.mark.parametrize("http2", PROTOCOLS)
async def test_a_common_name_outside_the_allowed_names_is_refused(
        server: clustermode.ClusterServer, plane: ControlPlane, http2: bool) -> None:
    intruder = plane.front_proxy.issue("not-the-front-proxy")
    async with server.aggregator(http2=http2, certificate=intruder) as agg:
        response = await agg.get(cluster.G, aggregator.AVAILABILITY)
    assert response.status_code == 401
    assert response.json()["reason"] == "Unauthorized"


async def test_a_client_certificate_is_its_cn_and_os(server: clustermode.ClusterServer,
                                                     plane: ControlPlane) -> None:
    carol = plane.issue_client_cert("carol", ["tenants"])
    async with server.aggregator(certificate=carol) as agg:
        # the X-Remote headers are ignored: this certificate is not the front proxy's
        response = await agg.get(LIST_A, aggregator.ADMIN)
    assert response.status_code == 403
    assert 'User "carol" cannot list' in response.json()["message"]


async def test_the_recorded_plugin_request_reads_its_status(
        server: clustermode.ClusterServer) -> None:
    async with server.aggregator() as agg:
        response = await agg.get(f"{cluster.G}/nodemodelstores/node-a/status",
                                 aggregator.PLUGIN_A, proxied=True)
    assert response.status_code == 200, response.text


async def test_a_rotated_front_proxy_ca_is_honoured_without_restart(
        tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp", front_proxy=FrontProxy()) as plane:
        clustermode.prepare(plane)
        with clustermode.running(plane, tmp_path / "server") as server:
            old = server.aggregator()
            assert (await old.get(cluster.G, aggregator.AVAILABILITY)).status_code == 200
            plane.front_proxy.rotate()
            plane.publish_authentication()
            new = server.aggregator()
            for _ in range(400):  # the watch delivers the change; this only bounds the wait
                try:
                    if (await new.get(cluster.G, aggregator.AVAILABILITY)).status_code == 200:
                        break
                # the handshake refused the new CA so far (with TLS 1.3 the client learns it
                # when it reads: the server's alert comes after the client's Finished)
                except (httpx.ConnectError, httpx.ReadError):
                    await new.aclose()
                    new = server.aggregator()
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"the new CA was never honoured:\n{server.log()[-3000:]}")
            # the old CA no longer counts, even on the connection opened before the rotation
            assert (await old.get(cluster.G, aggregator.AVAILABILITY)).status_code == 401
            await old.aclose()
            await new.aclose()
            assert server.process.poll() is None  # no restart


async def test_the_self_reviews_are_left_to_kube_apiserver(
        server: clustermode.ClusterServer) -> None:
    # standalone mode serves them; behind the aggregator kube-apiserver answers, so this server
    # neither lists their groups nor routes their paths
    async with server.aggregator() as agg:
        legacy = await agg.get("/apis", aggregator.LEGACY_DISCOVERY, accept="application/json")
        assert [group["name"] for group in legacy.json()["groups"]] == ["worker.gpustack.ai"]
        aggregated = await agg.get("/apis", aggregator.AGGREGATED_DISCOVERY,
                                   accept=aggregator.DISCOVERY_V2_ACCEPT)
        assert [item["metadata"]["name"] for item in aggregated.json()["items"]] == [
            "worker.gpustack.ai"]
        for path in ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                     "/apis/authentication.k8s.io/v1/selfsubjectreviews"):
            answer = await agg.request("POST", path, aggregator.ADMIN, json={})
            assert answer.status_code == 404, (path, answer.text)
