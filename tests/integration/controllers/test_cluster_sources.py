"""The controllers' cluster sources against the fixture control plane: Secrets read with get and
watched (a rotation reported, data never kept), claims from the PVC informer, Leases for leader
election, the settings ConfigMap, all through kube.Client and the worker's RBAC."""

from __future__ import annotations

import asyncio
import base64
import pathlib
from collections.abc import AsyncIterator

import pytest

import kube
from controllers import config as settings
from controllers.resolver import settings as clustersettings
from controllers.runtime import client as clients
from controllers.runtime import informer, leader
from controllers.sources import claims, kubeapi, kubesecrets, secrets
from devkit import chartrbac
from devkit.controlplane import ControlPlane, UserInfo, resources
from hub import config as hub_config
from tests.support import waiting
from timing import clock as clocks

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
WORKER_TOKEN = "fixture-worker-token"


@pytest.fixture
async def cluster(tmp_path: pathlib.Path) -> AsyncIterator[tuple[ControlPlane, kubeapi.KubeApi]]:
    with ControlPlane(tmp_path / "cp", namespaces=("gpustack-system", "team-a")) as cp:
        cp.add_token(WORKER_TOKEN, UserInfo(WORKER, uid="worker-uid",
                                            groups=("system:serviceaccounts",)))
        chart = chartrbac.render()
        assert WORKER.endswith(f":{chart.worker_account}")
        chart.apply(cp)  # what the chart grants the worker, and nothing else
        path = cp.write_kubeconfig(tmp_path / "worker.kubeconfig", token=WORKER_TOKEN)
        client = kube.Client.from_kubeconfig(path)
        try:
            yield cp, kubeapi.KubeApi(client)
        finally:
            await client.aclose()


def _secret(name: str, token: str | None) -> dict[str, object]:
    data = {} if token is None else {"token": base64.b64encode(token.encode()).decode()}
    return {"metadata": {"name": name, "namespace": "team-a"}, "data": data}


async def test_secrets_are_read_on_demand_and_watched(
        cluster: tuple[ControlPlane, kubeapi.KubeApi]) -> None:
    cp, api = cluster
    source = kubesecrets.KubeSecrets(api, clocks.SystemClock())
    with pytest.raises(secrets.SecretMissing, match="not found"):
        await source.token("team-a", "hf")
    cp.seed(resources.SECRETS, _secret("hf", "hf_first"))
    assert await source.token("team-a", "hf") == "hf_first"
    cp.seed(resources.SECRETS, _secret("empty", None))
    with pytest.raises(secrets.SecretMissing, match="no key"):
        await source.token("team-a", "empty")
    heard: list[tuple[str, str]] = []
    source.subscribe(lambda namespace, name: heard.append((namespace, name)))
    task = asyncio.create_task(source.run())
    try:
        await waiting.until(lambda: source._versions, what="the Secrets listed")
        assert heard == []  # the first list reports nothing
        cp.put(resources.SECRETS, _secret("hf", "hf_rotated"))
        await waiting.until(lambda: heard == [("team-a", "hf")], what="the rotation heard")
        assert await source.token("team-a", "hf") == "hf_rotated"
        assert "hf_rotated" not in repr(source.__dict__)  # versions only, never data
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_unreadable_secret_is_not_a_missing_one(
        cluster: tuple[ControlPlane, kubeapi.KubeApi]) -> None:
    cp, api = cluster
    cp.seed(resources.SECRETS, _secret("hf", "hf_x"))
    source = kubesecrets.KubeSecrets(api, clocks.SystemClock())
    with cp.fail(r"GET /api/v1/namespaces/team-a/secrets/hf", 500, count=1), \
            pytest.raises(secrets.SecretUnreadable):
        await source.token("team-a", "hf")


async def test_claims_come_from_the_informer(
        cluster: tuple[ControlPlane, kubeapi.KubeApi]) -> None:
    cp, api = cluster
    pvcs = informer.Informer(api, clients.CLAIMS, clocks.SystemClock())
    found = claims.ClaimInformer(pvcs)
    with pytest.raises(claims.ClaimUnreadable):
        found.exists("team-a", "models")
    changed: list[tuple[str, str]] = []
    found.subscribe(lambda namespace, name: changed.append((namespace, name)))
    task = asyncio.create_task(pvcs.run())
    try:
        await pvcs.synced.wait()
        assert not found.exists("team-a", "models")
        cp.seed(resources.PVCS, {"metadata": {"name": "models", "namespace": "team-a"},
                                 "spec": {"accessModes": ["ReadOnlyMany"]}})
        await waiting.until(lambda: found.exists("team-a", "models"))
        assert changed == [("team-a", "models")]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_leases_through_the_api(cluster: tuple[ControlPlane, kubeapi.KubeApi]) -> None:
    cp, api = cluster
    timing = leader.Timing(lease_duration=2, renew_deadline=1.5, retry_period=0.2)
    a = leader.LeaseElector(api.leases(), clocks.SystemClock(), namespace="gpustack-system",
                            name=settings.DEFAULT_LEASE, identity="replica-a", timing=timing)
    b = leader.LeaseElector(api.leases(), clocks.SystemClock(), namespace="gpustack-system",
                            name=settings.DEFAULT_LEASE, identity="replica-b", timing=timing)
    await a.acquire()
    lease = cp.get(resources.LEASES, settings.DEFAULT_LEASE, "gpustack-system")
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"
    taking = asyncio.create_task(b.acquire())
    await a.release()
    await asyncio.wait_for(taking, 30)
    lease = cp.get(resources.LEASES, settings.DEFAULT_LEASE, "gpustack-system")
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] == 1


async def test_the_settings_configmap_reconfigures(
        cluster: tuple[ControlPlane, kubeapi.KubeApi], tmp_path: pathlib.Path) -> None:
    cp, api = cluster
    applied: list[tuple[hub_config.HubConfig, float]] = []
    maps = informer.Informer(api, clients.CONFIG_MAPS, clocks.SystemClock(),
                             namespace="gpustack-system")
    clustersettings.ClusterSettings(
        maps, namespace="gpustack-system", name="model-manager-settings",
        base=hub_config.HubConfig(), interval=86400, state_dir=tmp_path / "state",
        apply=lambda config, interval: applied.append((config, interval)))
    task = asyncio.create_task(maps.run())
    try:
        await maps.synced.wait()
        cp.seed(resources.CONFIGMAPS, {
            "metadata": {"name": "model-manager-settings", "namespace": "gpustack-system"},
            "data": {"model-artifact-huggingface-endpoint": "https://hf-mirror.example",
                     "model-artifact-revalidate-interval": "6h"}})
        await waiting.until(lambda: applied and applied[-1][1] == 6 * 3600)
        assert applied[-1][0].huggingface_endpoint == "https://hf-mirror.example"
        count = len(applied)
        cp.put(resources.CONFIGMAPS, {
            "metadata": {"name": "model-manager-settings", "namespace": "gpustack-system"},
            "data": {"model-artifact-revalidate-interval": "5s"}})  # below the 1m floor
        await waiting.until(lambda: maps.get("gpustack-system", "model-manager-settings")
                            and maps.get("gpustack-system", "model-manager-settings")
                            ["data"].get("model-artifact-revalidate-interval") == "5s")
        assert len(applied) == count  # refused: the last good settings stay
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
