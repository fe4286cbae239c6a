"""The chart's RBAC is exactly what the code needs: the fixture control plane holds only the
cluster's bootstrap roles plus the chart's rendered Roles, ClusterRoles and bindings, and the real
API server in cluster mode, started with the chart's own args (``--controllers=embedded
--leader-elect``), and the node plugin, as the chart's ServiceAccounts, do their whole job:
resolve a hub artifact with a Secret and a claim artifact, record Events, hold and renew the
Lease, read the settings and the hub CA ConfigMaps, keep node-a's NodeModelStore (its Node, its
CSINode, its kubelet's configz), find the plugin Pods and their DaemonSet (the warm-up Pods'
tolerations), and take the plugin's status write through the guard's Pod lookup (a token without
the node-name extra, as before Kubernetes 1.30); the plugin reviews a caller's token on its HTTPS
port.

Then: no request of either identity was refused, and every rule of the chart's own roles was
needed by at least one request (an unused grant fails the test), and the plugin's requests to
this API were authorized by the chart's grants. A second test removes one grant and watches the
call that needs it fail.
"""

from __future__ import annotations

import asyncio
import base64
import pathlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest

import kube
from controllers.prefetches import warmup
from devkit import chartrbac, fixturehub, helm
from devkit.controlplane import (
    ADMIN_TOKEN,
    ControlPlane,
    Recorded,
    Role,
    Rule,
    UserInfo,
    resources,
)
from devkit.controlplane import service_account as sa_user
from devkit.controlplane.rbac import Attributes
from devkit.harness import clustermode
from devkit.harness.apiserver import free_port
from kube.resources import ModelArtifact, NodeModelStore
from nodeplugin import plugin
from openapi import keys, sources
from tests.integration.apiserver import cluster
from tests.integration.nodeplugin import csi_harness
from tests.support import pools, waiting
from tests.unit.nodeplugin import fakes

NS = helm.NAMESPACE
GROUP = "worker.gpustack.ai"
DRIVER = "model.csi.gpustack.ai"
HUB_TOKEN = "hf_chart_rbac_token"
POD = ("model-manager-node-x7k2p", "2f0e9a4c-6a53-4d7e-9b39-1c3f1d1e5a10")
PLUGIN_TOKEN = "plugin-pod-token-before-1-30"
# the container paths of the chart's args; the test gives the server its own
CONTAINER_FLAGS = ("--bind", "--port", "--data-dir", "--tls-cert-file", "--tls-private-key-file")


def _render(hub: fixturehub.Hub) -> list[dict[str, Any]]:
    return helm.template(sets=[
        f"settings.model-artifact-huggingface-endpoint={hub.endpoint}",
        "settings.model-artifact-ca-bundle=hub-ca",
        "settings.model-artifact-revalidate-interval=1h",
    ]).docs()


def _server_args(docs: list[dict[str, Any]], plugin_port: int) -> list[str]:
    args = helm.expanded_args(helm.container(docs, "Deployment", "apiserver"))
    kept = [a for a in args if a.partition("=")[0] not in CONTAINER_FLAGS]
    return [*kept, f"--plugin-secure-port={plugin_port}"]


def _plugin_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The DaemonSet's Pod on node-a, as the scheduler and kubelet would have it."""
    daemonset = helm.one(docs, "DaemonSet")
    template = daemonset["spec"]["template"]
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "controller": True,
             "name": daemonset["metadata"]["name"], "uid": "ds-uid"}
    return {"metadata": {"name": POD[0], "namespace": NS, "uid": POD[1],
                         "labels": template["metadata"]["labels"], "ownerReferences": [owner]},
            "spec": {**template["spec"], "nodeName": "node-a"},
            "status": {"phase": "Running", "podIP": "127.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip


def _seed(cp: ControlPlane, docs: list[dict[str, Any]], hub: fixturehub.Hub) -> UserInfo:
    """The cluster after ``helm install``: the chart's RBAC and settings, a node running the
    plugin, a tenant's Secret and claim. Returns the plugin's identity."""
    chartrbac.install(cp, docs)
    cp.add_token(clustermode.WORKER_TOKEN, clustermode.WORKER)
    clustermode.add_plugin_token(cp)
    plugin_user = sa_user(NS, "model-manager-node", uid="sa-node-uid", pod=POD)  # no node extra
    cp.add_token(PLUGIN_TOKEN, plugin_user)
    cp.seed(resources.CONFIGMAPS, helm.one(docs, "ConfigMap"))
    assert hub.ca_bundle is not None
    cp.seed(resources.CONFIGMAPS, {"metadata": {"name": "hub-ca", "namespace": NS},
                                   "data": {"ca.crt": pathlib.Path(hub.ca_bundle).read_text()}})
    cp.seed(resources.NODES, {"metadata": {"name": "node-a"}})
    cp.seed(resources.CSINODES, {"metadata": {"name": "node-a"},
                                 "spec": {"drivers": [{"name": DRIVER, "nodeID": "node-a"}]}})
    cp.set_configz("node-a", {"evictionHard": {"nodefs.available": "10%"},
                              "imageGCHighThresholdPercent": 85})
    cp.seed(resources.DAEMONSETS, {**helm.one(docs, "DaemonSet"), "metadata": {
        **helm.one(docs, "DaemonSet")["metadata"], "uid": "ds-uid"}})
    cp.seed(resources.PODS, _plugin_pod(docs))
    cp.seed(resources.SECRETS, {"metadata": {"name": "hf", "namespace": "team-a"},
                                "data": {"token": base64.b64encode(HUB_TOKEN.encode()).decode()}})
    cp.seed(resources.PVCS, {"metadata": {"name": "models", "namespace": "team-a"},
                             "spec": {"accessModes": ["ReadOnlyMany"]}})
    hub.add_repo("org/private", {"config.json": b"{}", "w.bin": 4096}, private_token=HUB_TOKEN)
    return plugin_user


@pytest.fixture
async def world(tmp_path: pathlib.Path) -> AsyncIterator[tuple[ControlPlane, fixturehub.Hub]]:
    with ControlPlane(tmp_path / "cp", namespaces=(NS, "team-a")) as cp, \
            fixturehub.run(tls=True) as hub:
        yield cp, hub


async def _resolved(client: kube.Client, name: str) -> str:
    found = await client.get(ModelArtifact, name, namespace="team-a")
    conditions = (found.get("status") or {}).get("conditions") or []
    return next((f"{c['status']}/{c['reason']}" for c in conditions if c["type"] == "Resolved"),
                "")


def _gated_pod(artifact: dict[str, Any], name: str = "gated",
               uid: str = "7a1c2f4e-0b9d-4c55-8f0e-3d2b1a6c9e01") -> dict[str, Any]:
    """A Pod as the Pod webhook admits it gated: opted in, labelled, gated, its volume filled."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "team-a", "uid": uid,
        "annotations": {keys.REQUIRE_WARM_NODE: keys.REQUIRE_WARM_NODE_ON},
        "labels": {keys.WAITING_FOR_WARM_NODE: keys.REQUIRE_WARM_NODE_ON}},
        "spec": {"schedulingGates": [{"name": keys.WARM_NODE_GATE}],
                 "containers": [{"name": "reader", "image": "busybox"}],
                 "volumes": [{"name": "model", "csi": {
                     "driver": DRIVER, "readOnly": True, "volumeAttributes": {
                         "artifact": "hub", "artifactUID": artifact["metadata"]["uid"],
                         "manifestDigest": artifact["status"]["resolved"]["manifestDigest"]}}}]}}


def _by(cp: ControlPlane, user: str) -> list[Recorded]:
    return [r for r in cp.recorder.requests() if r.user == user]


def _review_attributes(entry: Recorded) -> tuple[str, Attributes] | None:
    """(user, attributes) of a SubjectAccessReview the server sent for one of its callers."""
    spec = (entry.body or {}).get("spec") or {}
    found = spec.get("resourceAttributes")
    if not entry.path.endswith("/subjectaccessreviews") or not found:
        return None
    return spec["user"], Attributes(
        user=UserInfo(spec["user"], groups=tuple(spec.get("groups") or ())),
        verb=found.get("verb", ""), resource_request=True,
        namespace=found.get("namespace", ""), group=found.get("group", ""),
        resource=found.get("resource", ""), subresource=found.get("subresource", ""),
        name=found.get("name", ""))


async def test_the_charts_rbac_is_what_the_server_controllers_and_plugin_use(
    world: tuple[ControlPlane, fixturehub.Hub], tmp_path: pathlib.Path
) -> None:
    cp, hub = world
    docs = _render(hub)
    plugin_user = _seed(cp, docs, hub)
    plugin_port = free_port()
    args = _server_args(docs, plugin_port)
    assert "--controllers=embedded" in args and "--leader-elect" in args
    server = clustermode.start(cp, tmp_path / "server", extra_args=[
        *args, f"--huggingface-endpoint={hub.endpoint}", f"--hub-ca-bundle={hub.ca_bundle}",
        "--prefetch-warmup-retry-interval=1s"])
    started: plugin.Plugin | None = None
    clients: list[kube.Client] = []
    try:
        # the GPUStack server (an administrator) creates the artifacts
        with server.client(ADMIN_TOKEN) as http:
            for name, source in (
                    ("hub", {"huggingFace": {"repository": "org/private",
                                             "secretRef": {"name": "hf"}}}),
                    ("claim", {"persistentVolumeClaim": {"claimName": "models"}})):
                created = http.post(f"{cluster.G}/namespaces/team-a/modelartifacts",
                                    json=cluster.artifact(name, "team-a", source))
                assert created.status_code == 201, created.text
        admin = kube.Client.from_kubeconfig(
            server.kubeconfig(tmp_path / "admin.kubeconfig", ADMIN_TOKEN))
        clients.append(admin)
        for name in ("hub", "claim"):
            await waiting.until_async(lambda n=name: _resolved(admin, n), "True/Resolved",
                                      guard=60)
        # the administrator warms node-a; the worker's warm-up Pod fails and is made again
        with server.client(ADMIN_TOKEN) as http:
            pools.setup(http, "team-a", ["node-a"])
            created = http.post(f"{cluster.G}/namespaces/team-a/modelprefetches", json={
                "apiVersion": f"{GROUP}/v1", "kind": "ModelPrefetch",
                "metadata": {"name": "warm", "namespace": "team-a"},
                "spec": {"artifactRef": {"name": "hub"}, "bindingRef": {"name": "grant"}}})
            assert created.status_code == 201, created.text
        pod_name = warmup.pod_name("warm", "node-a")
        await waiting.until(lambda: cp.get(resources.PODS, pod_name, "team-a") is not None,
                            guard=60, what="the warm-up Pod")
        failed = cp.get(resources.PODS, pod_name, "team-a")
        assert failed is not None and "nodeName" not in failed["spec"]  # the scheduler's to bind
        (term,) = failed["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term["matchFields"] == [
            {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]
        assert failed["spec"]["tolerations"] == []  # the chart's plugin tolerates by wildcard
        cp.put(resources.PODS, {**failed, "status": {"phase": "Failed", "reason": "Evicted"}})
        await waiting.until(lambda: cp.recorder.count(f"/namespaces/team-a/pods/{pod_name}",
                                                      "DELETE"),
                            guard=60, what="the failed warm-up Pod's deletion")
        # the plugin as the DaemonSet's ServiceAccount, in a Pod on node-a
        kubeconfig = server.kubeconfig(tmp_path / "plugin.kubeconfig", PLUGIN_TOKEN)
        ours = kube.Client.from_kubeconfig(kubeconfig)
        theirs = kube.Client.from_kubeconfig(
            cp.write_kubeconfig(tmp_path / "plugin-cluster.kubeconfig", token=PLUGIN_TOKEN))
        clients += [ours, theirs]
        config = plugin.Config(
            node_name="node-a", endpoint=f"unix://{tmp_path}/csi.sock",
            root=str(tmp_path / "cache"), kubelet_dir=str(tmp_path / "kubelet"),
            namespace=NS, worker_user=clustermode.WORKER.name, secure_port=plugin_port,
            bind_address="127.0.0.1")
        started = await plugin.start(config, kube_client=ours, cluster_client=theirs,
                                     mount=fakes.FakeMounter())

        async def reported() -> bool:
            store = await ours.get(NodeModelStore, "node-a")
            status, metadata = store.get("status") or {}, store["metadata"]
            return bool(status.get("observedGeneration") == metadata["generation"]
                        and any(c["type"] == "Ready" for c in status.get("conditions") or []))

        await waiting.until_async(reported, True, guard=60)
        # the prefetch warms node-a; a Pod the webhook gated (no node held it) is released
        hub_artifact = await admin.get(ModelArtifact, "hub", namespace="team-a")
        digest = hub_artifact["status"]["resolved"]["manifestDigest"]

        async def warm() -> bool:
            found = await ours.get(NodeModelStore, "node-a")
            return any(m.get("digest") == digest and m.get("state") == "Ready"
                       for m in (found.get("status") or {}).get("models") or [])

        # a reader Pod on node-a mounts it, as kubelet asks the plugin (it downloads it then)
        reader = _gated_pod(hub_artifact, "reader", "5b2d9c1e-7f3a-4e62-9d10-2c4b8a6e1f07")
        reader["spec"] = {**reader["spec"], "nodeName": "node-a", "schedulingGates": []}
        cp.seed(resources.PODS, reader)
        kubelet = csi_harness.Kubelet(tmp_path / "csi.sock", tmp_path / "kubelet")
        try:
            request = kubelet.publish_request(
                namespace="team-a", pod_uid=reader["metadata"]["uid"], pod_name="reader",
                volume="model", attributes=reader["spec"]["volumes"][0]["csi"]["volumeAttributes"],
                secrets={sources.SECRET_TOKEN_KEY: HUB_TOKEN})
            seen = await asyncio.to_thread(kubelet.publish_until_ok, request, 60.0)
            assert seen[-1][0] == grpc.StatusCode.OK, seen[-3:]
        finally:
            kubelet.close()
        await waiting.until_async(warm, True, guard=60)
        cp.seed(resources.PODS, _gated_pod(hub_artifact))

        def gates() -> object:
            found = cp.get(resources.PODS, "gated", "team-a")
            return None if found is None else found["spec"].get("schedulingGates") or []

        # the Pod's state, not the PATCH's arrival (recorded before it is applied): under load
        # the read could come between the two
        await waiting.until(lambda: gates() == [], guard=60,
                            what="the warm-gate controller's release of the gated Pod")
        assert cp.recorder.count("/namespaces/team-a/pods/gated", "PATCH")  # allowed: applied
        store = await ours.get(NodeModelStore, "node-a")
        assert store["metadata"]["ownerReferences"][0]["kind"] == "Node"  # nodes get
        assert store["spec"]["kubelet"]  # nodes/proxy get
        assert store["spec"]["hub"]["caBundleConfigMap"] == "hub-ca"
        # the worker reads the plugin's downloads with the chart's projected token for the
        # plugins' audience; its API token (the chart's other projected token) is refused there
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        async with httpx.AsyncClient(verify=context) as http_client:
            answer, api_token = [await http_client.get(
                f"https://127.0.0.1:{plugin_port}/model/downloads",
                headers={"Authorization": f"Bearer {token}"})
                for token in (clustermode.PLUGIN_AUDIENCE_TOKEN, clustermode.WORKER_TOKEN)]
        assert answer.status_code == 200, answer.text
        assert api_token.status_code == 401, api_token.text
        # a renewal of the Lease (an update), not only its creation
        await waiting.until(lambda: cp.recorder.count("/leases/model-manager-controllers", "PUT"),
                            guard=60, what="a renewal of the Lease")
    finally:
        if started is not None:
            await started.stop(0)
        for client in clients:
            await client.aclose()
        server.stop()

    worker_name = clustermode.WORKER.name
    for user in (worker_name, plugin_user.name):
        refused = [f"{r.method} {r.path}?{r.query} -> {r.code}" for r in _by(cp, user)
                   if r.code in (401, 403)]
        assert refused == [], f"{user} was refused:\n" + "\n".join(refused)
    # every rule of the chart's own roles was needed
    for account, user in (("model-manager-worker", clustermode.WORKER),
                          ("model-manager-node", plugin_user)):
        grants = chartrbac.grants_to(docs, account, NS)
        kube_grants = [g for g in grants if GROUP not in g.rule.api_groups]
        asked = [chartrbac.attributes(r, user) for r in _by(cp, user.name)]
        unused = []
        for grant in kube_grants:  # each verb on each resource of a rule, on its own
            for verb in grant.rule.verbs:
                for resource in grant.rule.resources:
                    one = chartrbac.Grant(grant.role, Rule(
                        (verb,), grant.rule.api_groups, (resource,), grant.rule.resource_names))
                    if not any(chartrbac.allows(one, a) for a in asked):
                        unused.append(one.describe())
        made = "\n".join(f"{r.method} {r.path}?{r.query} {r.code}" for r in _by(cp, user.name))
        assert unused == [], f"{account} was granted what it never asked for:\n" + "\n".join(
            unused) + f"\nits requests:\n{made}"
    # the plugin's calls to this API, as the server asked kube-apiserver about them
    reviews = [found for r in cp.recorder.requests("/subjectaccessreviews", "POST")
               if (found := _review_attributes(r)) is not None]
    plugin_asked = {(a.resource + (f"/{a.subresource}" if a.subresource else ""), a.verb)
                    for user, a in reviews if user == plugin_user.name}
    assert {("modelartifacts", "list"), ("modelartifacts", "watch"), ("nodemodelstores", "list"),
            ("nodemodelstores", "watch"), ("nodemodelstores/status", "patch")} <= plugin_asked
    assert all(cp.policy.authorize(a).allowed for user, a in reviews if user == plugin_user.name)


async def test_without_a_grant_the_call_that_needs_it_fails(
    world: tuple[ControlPlane, fixturehub.Hub], tmp_path: pathlib.Path
) -> None:
    """pods get removed from the worker's Role: the status guard cannot look the plugin's Pod up
    (503, never a pass); with the chart's Role back, the same write goes through."""
    cp, hub = world
    docs = _render(hub)
    _seed(cp, docs, hub)
    role = next(r for r in chartrbac.roles(docs) if r.name == "model-manager-worker"
                and r.namespace == NS)  # fmt: skip
    pods = next(r for r in role.rules if "pods" in r.resources)
    cp.policy.add_role(Role(role.name, tuple(
        r if r is not pods else Rule(("list", "watch"), r.api_groups, r.resources)
        for r in role.rules), role.namespace))
    data_dir = tmp_path / "server"
    cluster.seed_store(data_dir)
    args = [a for a in _server_args(docs, free_port()) if not a.startswith("--controllers")
            and a != "--leader-elect"]  # fmt: skip
    path = f"{cluster.G}/nodemodelstores/node-a/status"
    patch = {"status": {"observedGeneration": 1}}
    headers = {"Content-Type": "application/merge-patch+json"}
    with clustermode.running(cp, data_dir, extra_args=[*args, "--controllers=none"]) as server, \
            server.client(PLUGIN_TOKEN) as http:
        refused = http.patch(path, json=patch, headers=headers)
        assert refused.status_code == 503, refused.text
        assert "rule 3 (same node) could not be checked" in refused.json()["message"]
        lookups = cp.recorder.requests(f"/namespaces/{NS}/pods/{POD[0]}", "GET")
        assert lookups and {r.code for r in lookups} == {403}
        chartrbac.install(cp, docs)  # the chart's Role again
        written = http.patch(path, json=patch, headers=headers)
        assert written.status_code == 200, written.text
