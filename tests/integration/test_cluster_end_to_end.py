"""Cluster mode end to end, with a real mount, in one flow.

The fixture control plane holds only the bootstrap roles and the chart's rendered RBAC; the real
API server runs in cluster mode with the chart's args and its embedded controllers, behind an
APIService, so every request for ``/apis/worker.gpustack.ai`` goes through the control plane
(authenticated and authorized there, then proxied with the front-proxy certificate and
``X-Remote-*`` headers). A tenant with a Role in team-a drives it with the real kubectl and
lightkube through the control plane; the real node plugin of node-a, as the chart's plugin
ServiceAccount with a Pod-bound token, talks to the same control plane (as in-cluster config
would) and serves a real gRPC unix socket; the test plays kubelet for an inline CSI volume and
the files land in a real read-only bind mount, byte-identical to the fixture hub's.

Then the refusals along the same path (a tenant without RBAC, a Pod of another namespace, a
tenant writing a NodeModelStore's status), the unmount, and: no request of the server's or the
plugin's identity was refused by the control plane.
"""

from __future__ import annotations

import asyncio
import errno
import json
import pathlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest

import kube
from devkit import chartrbac, fixturehub, helm
from devkit.controlplane import (
    ADMIN_TOKEN,
    API_AUDIENCE,
    ControlPlane,
    Recorded,
    Role,
    Rule,
    Subject,
    UserInfo,
    resources,
)
from devkit.controlplane import service_account as sa_user
from devkit.harness import clustermode
from devkit.harness.apiserver import free_port
from hub import config as hub_config
from hub import huggingface, listing
from kube import errors as kube_errors
from kube.resources import ModelArtifact, NodeModelStore
from nodeplugin import plugin
from tests.integration.nodeplugin import csi_harness
from tests.support import waiting
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.root

NS = helm.NAMESPACE
GROUP = "worker.gpustack.ai"
DRIVER = "model.csi.gpustack.ai"
MiB = 1 << 20
REPO = "org/tiny-e2e"
COMMIT = "e" * 40
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["TinyForCausalLM"]}\n',
    "model.safetensors": 3 * MiB + 11,
    "tokenizer.json": fixturehub.FileSpec(size=70_000, lfs=False),
}
ARTIFACT = "tiny"
PLUGIN_POD = ("model-manager-node-e2e7q", "7d1c5a2e-0b9f-4c61-8f3e-2a6d9b4c1e70")
NODE_UID = "0c3b8e51-node-a"
PLUGIN_TOKEN = "bound-plugin-token-node-a"
TENANT = UserInfo("alice", uid="alice-uid", groups=("team-a-developers",))
TENANT_TOKEN = "tenant-alice-token"
OUTSIDER = UserInfo("bob", uid="bob-uid", groups=("team-b-developers",))
OUTSIDER_TOKEN = "tenant-bob-token"
TENANT_POD = ("inference-0", "4f1e2d3c-team-a-inference-0")
OTHER_POD = ("inference-0", "9a8b7c6d-team-b-inference-0")
# the container paths of the chart's args; the test gives the server its own
CONTAINER_FLAGS = ("--bind", "--port", "--data-dir", "--tls-cert-file", "--tls-private-key-file")
POD_INFO = ("csi.storage.k8s.io/pod.name", "csi.storage.k8s.io/pod.namespace",
            "csi.storage.k8s.io/pod.uid", "csi.storage.k8s.io/serviceAccount.name",
            "csi.storage.k8s.io/ephemeral")  # fmt: skip


@pytest.fixture
async def world(tmp_path: pathlib.Path) -> AsyncIterator[tuple[ControlPlane, fixturehub.Hub]]:
    try:
        with ControlPlane(tmp_path / "cp", namespaces=(NS, "team-a", "team-b")) as cp, \
                fixturehub.run(tls=True) as hub:
            yield cp, hub
    finally:
        csi_harness.unmount_all_under(tmp_path)


def _chart(hub: fixturehub.Hub) -> chartrbac.Chart:
    return chartrbac.render(sets=(
        f"settings.model-artifact-huggingface-endpoint={hub.endpoint}",
        "settings.model-artifact-ca-bundle=hub-ca",
    ))


def _server_args(chart: chartrbac.Chart, plugin_port: int) -> list[str]:
    args = helm.expanded_args(helm.container(list(chart.docs), "Deployment", "apiserver"))
    kept = [a for a in args if a.partition("=")[0] not in CONTAINER_FLAGS]
    return [*kept, f"--plugin-secure-port={plugin_port}"]


def _tenant_pod(namespace: str, pod: tuple[str, str], attributes: dict[str, str]
                ) -> dict[str, Any]:
    """A tenant's Pod on node-a with the inline CSI volume, as the scheduler placed it."""
    return {"metadata": {"name": pod[0], "namespace": namespace, "uid": pod[1]},
            "spec": {"nodeName": "node-a", "serviceAccountName": "default",
                     "containers": [{"name": "server", "image": "registry.invalid/vllm",
                                     "volumeMounts": [{"name": "model", "mountPath": "/model",
                                                       "readOnly": True}]}],
                     "volumes": [{"name": "model", "csi": {
                         "driver": DRIVER, "readOnly": True, "volumeAttributes": attributes}}]},
            "status": {"phase": "Pending"}}  # fmt: skip


def _seed(cp: ControlPlane, chart: chartrbac.Chart, hub: fixturehub.Hub) -> UserInfo:
    """``helm install`` on a cluster with node-a; the tenants' tokens and alice's Role in
    team-a. Returns the plugin's identity."""
    docs = list(chart.docs)
    chart.apply(cp)
    cp.add_token(clustermode.WORKER_TOKEN, clustermode.WORKER)
    clustermode.add_plugin_token(cp)
    cp.seed(resources.NODES, {"metadata": {"name": "node-a", "uid": NODE_UID}})
    cp.seed(resources.CSINODES, {"metadata": {"name": "node-a"},
                                 "spec": {"drivers": [{"name": DRIVER, "nodeID": "node-a"}]}})
    cp.set_configz("node-a", {"evictionHard": {"nodefs.available": "10%"},
                              "imageGCHighThresholdPercent": 85})
    template = helm.one(docs, "DaemonSet")["spec"]["template"]
    cp.seed(resources.PODS, {
        "metadata": {"name": PLUGIN_POD[0], "namespace": NS, "uid": PLUGIN_POD[1],
                     "labels": template["metadata"]["labels"]},
        "spec": {**template["spec"], "nodeName": "node-a"},
        "status": {"phase": "Running", "podIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": "True"}]}})  # fmt: skip
    # the projected token of the DaemonSet's Pod: bound to it (kube 1.32+: its node too)
    plugin_user = sa_user(NS, chart.plugin_account, uid="sa-node-uid", pod=PLUGIN_POD,
                          node=("node-a", NODE_UID), credential_id="e2e-plugin-jti")
    cp.add_token(PLUGIN_TOKEN, plugin_user, audiences=(API_AUDIENCE,))
    cp.seed(resources.CONFIGMAPS, chart.one("ConfigMap"))
    assert hub.ca_bundle is not None
    cp.seed(resources.CONFIGMAPS, {"metadata": {"name": "hub-ca", "namespace": NS},
                                   "data": {"ca.crt": pathlib.Path(hub.ca_bundle).read_text()}})
    cp.add_token(TENANT_TOKEN, TENANT)
    cp.add_token(OUTSIDER_TOKEN, OUTSIDER)
    cp.policy.add_role(Role("model-artifact-user", (
        Rule(("create", "get", "list", "watch"), (GROUP,), ("modelartifacts",)),
        Rule(("get",), (GROUP,), ("modelartifacts/progress",))), namespace="team-a"))
    cp.policy.bind("model-artifact-user", [Subject("User", TENANT.name)], namespace="team-a",
                   role_kind="Role", name="alice-model-artifact-user")
    hub.add_repo(REPO, FILES, commit=COMMIT)
    return plugin_user


def _check_csidriver(chart: chartrbac.Chart) -> None:
    """What kubelet adds to an inline volume's context for this CSIDriver: the Pod's keys
    (podInfoOnMount) and, only with tokenRequests, ``serviceAccount.tokens``. The chart asks
    for no tokens, so the test's kubelet sends none."""
    spec = chart.one("CSIDriver")["spec"]
    assert spec["podInfoOnMount"] is True
    assert spec["volumeLifecycleModes"] == ["Ephemeral"]
    assert not spec.get("tokenRequests"), "the chart asks for tokens: send them as kubelet does"


async def _hub_digest(hub: fixturehub.Hub) -> str:
    """The manifest digest computed here from the hub's listing, independently of the server."""
    config = hub_config.HubConfig(huggingface_endpoint=hub.endpoint, ca_bundle=hub.ca_bundle)
    client = hub_config.make_client(config)
    try:
        source = huggingface.HuggingFace(client, hub.endpoint)
        return (await listing.manifest_for(source, REPO, COMMIT, (), (), token=None))[2]
    finally:
        await client.aclose()


def _by(cp: ControlPlane, user: str) -> list[Recorded]:
    return [r for r in cp.recorder.requests() if r.user == user]


def _files_under(target: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(target)): p.read_bytes()
            for p in sorted(target.rglob("*")) if p.is_file()}  # fmt: skip


def _resolved_digest(found: dict[str, Any]) -> str:
    status = found.get("status") or {}
    conditions = status.get("conditions") or []
    if not any(c["type"] == "Resolved" and c["status"] == "True" for c in conditions):
        return ""
    return str((status.get("resolved") or {}).get("manifestDigest") or "")


async def _live_bytes_through_the_plugin_audience(cp: ControlPlane, alice: Kubectl,
                                                  tmp_path: pathlib.Path, port: int) -> None:
    """While node-a downloads: the progress and copies views read its live bytes, so the worker
    asked the plugin with its token for the plugins' audience (the chart's ``plugin-token``,
    the harness's file); the plugin refuses the worker's API token, and kube-apiserver refuses
    the plugin-audience token, so neither credential works where the other is meant."""
    admin = Kubectl(cp.write_kubeconfig(tmp_path / "admin-ctl.kubeconfig", token=ADMIN_TOKEN,
                                        namespace="team-a"), tmp_path / "kubectl-admin")
    progress_path = f"/apis/{GROUP}/v1/namespaces/team-a/modelartifacts/{ARTIFACT}/progress"

    async def read(ctl: Kubectl, path: str) -> dict[str, Any]:
        return dict(json.loads((await asyncio.to_thread(ctl.run, "get", "--raw", path)).stdout))

    async def live_progress() -> tuple[object, bool]:
        body = await read(alice, progress_path)
        return body.get("live"), body.get("downloadingBytes", 0) >= MiB

    await waiting.until_async(live_progress, (1, True), guard=60)
    copies = await read(admin, progress_path.replace("/progress", "/copies"))
    (row,) = copies["nodes"]
    assert copies["live"] == 1 and row["live"] is True and row["downloadedBytes"] >= MiB
    url = f"https://127.0.0.1:{port}/model/downloads"
    async with httpx.AsyncClient(verify=False, timeout=30) as http:
        api_token = await http.get(url, headers={
            "authorization": f"Bearer {clustermode.WORKER_TOKEN}"})
        assert api_token.status_code == 401, api_token.text
        bound = await http.get(url, headers={
            "authorization": f"Bearer {clustermode.PLUGIN_AUDIENCE_TOKEN}"})
        assert bound.status_code == 200 and bound.json()["downloads"][0]["downloadedBytes"] > 0
        replayed = await http.get(f"{cp.url}/api/v1/namespaces/team-a/secrets",
                                  headers={"authorization":
                                           f"Bearer {clustermode.PLUGIN_AUDIENCE_TOKEN}"})
        assert replayed.status_code == 401


async def test_a_tenant_mounts_a_hub_model_through_the_aggregator_and_the_plugin(
    world: tuple[ControlPlane, fixturehub.Hub], tmp_path: pathlib.Path
) -> None:
    cp, hub = world
    chart = _chart(hub)
    _check_csidriver(chart)
    plugin_user = _seed(cp, chart, hub)
    plugin_port = free_port()
    args = _server_args(chart, plugin_port)
    assert "--controllers=embedded" in args
    server = clustermode.start(cp, tmp_path / "server", extra_args=[
        *args, f"--huggingface-endpoint={hub.endpoint}", f"--hub-ca-bundle={hub.ca_bundle}"])
    clients: list[kube.Client] = []
    started: plugin.Plugin | None = None
    kubelet: csi_harness.Kubelet | None = None
    try:
        # 1. the chart's APIService, its backend this server (trusting the server's own CA)
        api_service = chart.one("APIService")["spec"]
        cp.register_api_service(api_service["group"], api_service["version"], server.url,
                                server.ca_pem)
        alice = Kubectl(cp.write_kubeconfig(tmp_path / "alice.kubeconfig", token=TENANT_TOKEN,
                                            namespace="team-a"), tmp_path / "kubectl-alice")
        bob = Kubectl(cp.write_kubeconfig(tmp_path / "bob.kubeconfig", token=OUTSIDER_TOKEN,
                                          namespace="team-a"), tmp_path / "kubectl-bob")
        # 2. the tenant creates the artifact with kubectl, through the control plane
        manifest = {"apiVersion": f"{GROUP}/v1", "kind": "ModelArtifact",
                    "metadata": {"name": ARTIFACT, "namespace": "team-a"},
                    "spec": {"source": {"huggingFace": {"repository": REPO}}}}  # fmt: skip
        created = await asyncio.to_thread(alice.run, "create", "-f", "-", "-o", "json",
                                          stdin=json.dumps(manifest))
        uid = json.loads(created.stdout)["metadata"]["uid"]
        # kubectl validated it against the server's OpenAPI, served through the aggregator
        fetched = [r for r in cp.recorder.requests(f"/openapi/v3/apis/{GROUP}/v1", "GET")
                   if r.user == TENANT.name]  # fmt: skip
        assert fetched and {r.code for r in fetched} == {200}
        tenant = kube.Client.from_kubeconfig(alice.kubeconfig)
        clients.append(tenant)
        # the embedded controllers resolve it (lightkube through the control plane)
        wanted = await _hub_digest(hub)

        async def resolved() -> str:
            return _resolved_digest(await tenant.get(ModelArtifact, ARTIFACT,
                                                     namespace="team-a"))

        # kubectl's watch, relayed by the aggregator, sees the condition (the timeout a guard)
        await asyncio.to_thread(alice.run, "wait", "--for=condition=Resolved",
                                f"modelartifact/{ARTIFACT}", "--timeout=90s", timeout=120)
        assert await resolved() == wanted
        shown = await asyncio.to_thread(alice.run, "get", "modelartifact", ARTIFACT, "-o",
                                        "json")
        artifact = json.loads(shown.stdout)
        assert artifact["metadata"]["uid"] == uid
        assert artifact["status"]["resolved"]["revision"] == COMMIT

        # 3. the plugin of node-a, in-cluster to the control plane with its Pod-bound token
        plugin_client = kube.Client.from_kubeconfig(
            cp.write_kubeconfig(tmp_path / "plugin.kubeconfig", token=PLUGIN_TOKEN))
        admin = kube.Client.from_kubeconfig(
            cp.write_kubeconfig(tmp_path / "admin.kubeconfig", token=ADMIN_TOKEN))
        clients += [plugin_client, admin]
        kubelet_dir = tmp_path / "kubelet"
        kubelet_dir.mkdir()
        config = plugin.Config(
            node_name="node-a", endpoint=f"unix://{tmp_path}/csi/csi.sock",
            root=str(tmp_path / "models"), kubelet_dir=str(kubelet_dir), namespace=NS,
            worker_user=clustermode.WORKER.name, secure_port=plugin_port,
            bind_address="127.0.0.1")  # fmt: skip
        (tmp_path / "csi").mkdir()
        started = await plugin.start(config, kube_client=plugin_client)

        async def spec_applied() -> bool:
            store = await admin.get(NodeModelStore, "node-a")
            status = store.get("status") or {}
            hub_spec = (store.get("spec") or {}).get("hub") or {}
            return bool(status.get("observedGeneration") == store["metadata"]["generation"]
                        and hub_spec.get("huggingFaceEndpoint") == hub.endpoint
                        and any(c["type"] == "Ready" for c in status.get("conditions") or []))

        await waiting.until_async(spec_applied, True, guard=90)

        # the test is kubelet: the Pod's inline volume, its context as kubelet builds it
        attributes = {"artifact": ARTIFACT, "artifactUID": uid, "manifestDigest": wanted}
        cp.seed(resources.PODS, _tenant_pod("team-a", TENANT_POD, attributes))
        kubelet = csi_harness.Kubelet(pathlib.Path(config.endpoint[len("unix://"):]),
                                      kubelet_dir)
        request = kubelet.publish_request(namespace="team-a", pod_uid=TENANT_POD[1],
                                          pod_name=TENANT_POD[0], attributes=attributes,
                                          volume="model")
        assert set(POD_INFO) <= set(request.volume_context)
        assert "csi.storage.k8s.io/serviceAccount.tokens" not in request.volume_context
        # the weights pause at 1 MiB until the live bytes were seen (released then, whatever
        # the machine's speed)
        paused = hub.faults(REPO, "model.safetensors")
        paused.stall_at, paused.stall_until = MiB, threading.Event()
        code, message = await asyncio.to_thread(kubelet.publish_once_seen, request, 60)
        try:
            assert code == grpc.StatusCode.ABORTED, message  # the download under way
            await _live_bytes_through_the_plugin_audience(cp, alice, tmp_path, plugin_port)
        finally:
            paused.stall_until.set()
        outcomes = await asyncio.to_thread(kubelet.publish_until_ok, request, 90)
        code, message = outcomes[-1]
        assert code == grpc.StatusCode.OK, message
        target = pathlib.Path(request.target_path)
        assert csi_harness.mounts_under(target) == [str(target.resolve())]
        mounted = _files_under(target)
        assert mounted.pop(".gpustack-digest") == f"{wanted}\n".encode()  # the tree's markers
        assert mounted.pop(".gpustack-manifest").startswith(b"gpustack-manifest v1\n")
        assert mounted == {p: hub.content(REPO, p).read() for p in FILES}
        for attempt in (lambda: (target / "config.json").open("r+b"),
                        lambda: (target / "new-file").open("xb")):
            with pytest.raises(OSError) as refused:
                attempt()
            assert refused.value.errno == errno.EROFS

        async def ready_on_node() -> bool:
            store = await admin.get(NodeModelStore, "node-a")
            return any(m["digest"] == wanted and m["state"] == "Ready" and m["referenced"]
                       for m in (store.get("status") or {}).get("models") or [])

        await waiting.until_async(ready_on_node, True, guard=90)
        progress_path = f"/apis/{GROUP}/v1/namespaces/team-a/modelartifacts/{ARTIFACT}/progress"

        async def progress() -> tuple[int, str]:
            answer = await asyncio.to_thread(alice.run, "get", "--raw", progress_path)
            body = json.loads(answer.stdout)
            return body["ready"], body["manifestDigest"]

        await waiting.until_async(progress, (1, wanted), guard=60)
        read = await asyncio.to_thread(alice.run, "get", "--raw", progress_path)
        body = json.loads(read.stdout)
        assert body["kind"] == "ModelArtifactProgress" and body["failed"] == 0
        assert "node-a" not in read.stdout  # progress names no node

        # 4. refusals along the real path
        for command in (("get", "modelartifacts"), ("get", "--raw", progress_path)):
            stderr = await asyncio.to_thread(bob.fails, *command)
            assert 'User "bob" cannot' in stderr and "Forbidden" in stderr, stderr
        cp.seed(resources.PODS, _tenant_pod("team-b", OTHER_POD, attributes))
        foreign = kubelet.publish_request(namespace="team-b", pod_uid=OTHER_POD[1],
                                          pod_name=OTHER_POD[0], attributes=attributes,
                                          volume="model")
        code, message = await asyncio.to_thread(kubelet.publish, foreign)
        assert code == grpc.StatusCode.PERMISSION_DENIED, message
        assert f"no ModelArtifact '{ARTIFACT}' in namespace 'team-b'" in message
        assert csi_harness.mounts_under(pathlib.Path(foreign.target_path).parent) == []
        store_status = f"/apis/{GROUP}/v1/nodemodelstores/node-a/status"

        async def write_store_status() -> kube_errors.KubeError:
            with pytest.raises(kube_errors.KubeError) as refused:
                await tenant.request("PATCH", store_status, json_body={"status": {"models": []}},
                                     headers={"Content-Type": "application/merge-patch+json"})
            return refused.value

        denied = await write_store_status()  # RBAC: the control plane's, before any proxying
        assert denied.code == 403, denied
        assert 'User "alice" cannot patch resource "nodemodelstores/status"' in denied.message
        # even an administrator's over-broad grant stops at the server's status guard
        cp.policy.grant(Subject("User", TENANT.name), Rule(
            ("patch",), (GROUP,), ("nodemodelstores/status",)), name="too-broad-for-alice")
        guarded = await write_store_status()
        assert guarded.code == 403, guarded
        assert ('nodemodelstores/status "node-a": refused by rule 1 (plugin service account)'
                in guarded.message), guarded
        assert await ready_on_node()  # the status is the plugin's still

        # 5. kubelet unpublishes: the target goes, the tree stays
        await asyncio.to_thread(kubelet.unpublish, target, request.volume_id)
        assert csi_harness.mounts_under(kubelet_dir) == []
        assert not target.exists()
        assert started.cache.is_published(wanted)
    finally:
        if kubelet is not None:
            kubelet.close()
        if started is not None:
            await started.stop(0)
        for client in clients:
            await client.aclose()
        server.stop()

    # 6. neither the server nor the plugin was ever refused by the control plane
    for user in (clustermode.WORKER.name, plugin_user.name):
        made = _by(cp, user)
        assert made, f"{user} made no request"
        denials = [f"{r.method} {r.path}?{r.query} -> {r.code}" for r in made
                   if r.code in (401, 403)]
        assert denials == [], f"{user} was refused:\n" + "\n".join(denials)
    # the plugin's calls to this API went through the aggregator (its status writes too)
    proxied = [r for r in _by(cp, plugin_user.name) if r.path.startswith(f"/apis/{GROUP}/")]
    assert any(r.method == "PATCH" and r.path.endswith("/nodemodelstores/node-a/status")
               and r.code == 200 for r in proxied), [(r.method, r.path, r.code) for r in proxied]
