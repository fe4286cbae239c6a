"""The embedded controllers with a cluster: the API server's own hooks
(``apiserver.wiring.embedded``) over a real registry, their Secrets, claims, Lease and plugin Pods
from the fixture control plane, resolving against the fixture hub."""

from __future__ import annotations

import base64
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

import kube
from apiserver.flags import config
from apiserver.registry import build
from apiserver.storage import sqlite
from apiserver.wiring import embedded
from controllers import config as controller_settings
from controllers.sources import plugins
from devkit import admitting, fixturehub
from devkit.controlplane import ControlPlane, Rule, UserInfo, resources
from hub import config as hub_config
from tests.support import waiting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
TOKEN = "hf_cluster_token_3"


@pytest.fixture
async def world(tmp_path: pathlib.Path) -> AsyncIterator[tuple[ControlPlane, fixturehub.Hub,
                                                                 build.Registry]]:
    store = sqlite.Store(tmp_path / "store.db")
    await store.start()
    with ControlPlane(tmp_path / "cp", namespaces=("gpustack-system", "team-a")) as cp, \
            fixturehub.run() as hub:
        try:
            yield cp, hub, build.build(store, admission=admitting.standalone())
        finally:
            await store.close()


def _artifact(name: str, source: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"source": source}}


async def test_embedded_controllers_use_the_clusters_sources(
        world: tuple[ControlPlane, fixturehub.Hub, build.Registry],
        tmp_path: pathlib.Path) -> None:
    cp, hub, registry = world
    cp.add_token("worker-token", UserInfo(WORKER, uid="w"))
    cp.policy.grant(WORKER, [Rule(("get", "list", "watch"), ("",),
                                  ("secrets", "persistentvolumeclaims", "configmaps", "pods")),
                             Rule(("list", "watch"), ("",), ("nodes",)),  # prefetch selectors
                             # the plugin's DaemonSets: the warm-up Pods' tolerations
                             Rule(("list", "watch"), ("apps",), ("daemonsets",)),
                             Rule(("get", "create", "update"), ("coordination.k8s.io",),
                                  ("leases",)),
                             Rule(("create",), ("",), ("events",))])
    kubeconfig = cp.write_kubeconfig(tmp_path / "worker.kubeconfig", token="worker-token")
    cp.seed(resources.SECRETS, {"metadata": {"name": "hf", "namespace": "team-a"},
                                "data": {"token": base64.b64encode(TOKEN.encode()).decode()}})
    hub.add_repo("org/private", {"config.json": b"{}", "w.bin": 100}, private_token=TOKEN)
    settings = config.Settings(
        data_dir=tmp_path, tls_cert_file=tmp_path / "c", tls_private_key_file=tmp_path / "k",
        token_auth_file=tmp_path / "t", worker_username=WORKER,
        controller_settings=controller_settings.Settings(
            hub=hub_config.HubConfig(huggingface_endpoint=hub.endpoint), leader_elect=True,
            namespace="gpustack-system"))
    client = kube.Client.from_kubeconfig(kubeconfig)
    hooks = embedded.build_hooks(settings, registry, cluster_client=client)
    for start in hooks.start:
        await start()
    try:
        await registry.modelartifacts.create(_artifact("hub", {"huggingFace": {
            "repository": "org/private", "secretRef": {"name": "hf"}}}), namespace="team-a")
        await registry.modelartifacts.create(_artifact("claim", {"persistentVolumeClaim": {
            "claimName": "models"}}), namespace="team-a")

        async def reason(name: str) -> str:
            status = (await registry.modelartifacts.get("team-a", name)).get("status") or {}
            found = [c for c in status.get("conditions", []) if c["type"] == "Resolved"]
            return f"{found[0]['status']}/{found[0]['reason']}" if found else ""

        await waiting.until_async(lambda: reason("hub"), "True/Resolved")
        await waiting.until_async(lambda: reason("claim"), "False/ClaimNotFound")
        cp.seed(resources.PVCS, {"metadata": {"name": "models", "namespace": "team-a"},
                                 "spec": {"accessModes": ["ReadOnlyMany"]}})
        await waiting.until_async(lambda: reason("claim"), "True/Resolved")
        lease = cp.get(resources.LEASES, "model-manager-controllers", "gpustack-system")
        assert lease is not None and lease["spec"]["holderIdentity"]

        def events() -> list[dict[str, Any]]:
            return cp.store.list(resources.EVENTS, "team-a", lambda e: True)[0]

        async def recorded() -> set[tuple[str, str, str]]:
            return {(e["involvedObject"]["name"], e["type"], e["reason"]) for e in events()}

        await waiting.until_async(recorded, {("hub", "Normal", "Resolved"),
                                             ("claim", "Warning", "ClaimNotFound"),
                                             ("claim", "Normal", "Resolved")})
        assert TOKEN not in str(events())
    finally:
        for stop in reversed(hooks.stop):
            await stop()
        await client.aclose()
    released = cp.get(resources.LEASES, "model-manager-controllers", "gpustack-system")
    assert released is not None and released["spec"]["holderIdentity"] == ""


async def test_the_worker_asks_the_plugins_with_its_own_clients_token(
        tmp_path: pathlib.Path) -> None:
    """The live progress reads carry the bearer token of the server's own kube client, whatever
    gives it (a kubeconfig token file here, re-read when it rotates; a projected token in a Pod),
    not a fixed in-cluster path; a client-certificate identity has none to send."""
    with ControlPlane(tmp_path / "cp") as cp:
        token_file = tmp_path / "token"
        token_file.write_text("worker-token-1\n")
        path = cp.write_kubeconfig(tmp_path / "worker.kubeconfig", token_file=token_file)
        async with kube.Client.from_kubeconfig(path) as client:
            read = plugins.token_of(client)
            assert await read() == "worker-token-1"
            replacement = tmp_path / "token.new"
            replacement.write_text("worker-token-2\n")
            replacement.replace(token_file)
            assert await read() == "worker-token-2"
            token_file.unlink()
            assert await read() is None
        inline = cp.write_kubeconfig(tmp_path / "inline.kubeconfig", token="inline-token")
        async with kube.Client.from_kubeconfig(inline) as client:
            assert await plugins.token_of(client)() == "inline-token"
        certified = cp.write_kubeconfig(tmp_path / "cert.kubeconfig",
                                        client=cp.issue_client_cert("worker"))
        async with kube.Client.from_kubeconfig(certified) as client:
            assert await plugins.token_of(client)() is None
