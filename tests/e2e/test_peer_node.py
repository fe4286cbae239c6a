"""Node-to-node sync with a real kubelet (issue 22): a ModelPrefetch warms the real node (its
warm-up Pod, placed by kube-scheduler through node affinity, mounts the artifact through kubelet),
then a second node pulls the tree from the first node's plugin instead of the hub. Between the
two, warm-up Pods meet the real scheduler's rules (issue 35): a tainted node gets none, a
cordoned one a Pod the scheduler refuses (said in the prefetch's status) and warms once
uncordoned.

The rig has one kubelet, so the second node ("node-b") is what a node is to this product without
one: a Node and a CSINode listing the driver (the worker then keeps its NodeModelStore), a plugin
Pod bound to it (it never runs; it is what the plugin's tokens are bound to, so the API server's
status guard sees the plugin's ServiceAccount on node-b), and ``python -m nodeplugin`` on the host
with those tokens, driven over its CSI socket the way kubelet drives the DaemonSet's plugin. It
finds node A's peer port in A's NodeModelStore ``status.peer.url`` (A's Pod IP, routed from the
host over the CNI bridge) and A's plugin reviews its peer token with kube-apiserver.

The release is this module's own: the conftest's values with ``modelManager.peerSync.enabled``
and the warm-up Pods' image set to the rig's busybox under a fixed tag (no registry here)."""

from __future__ import annotations

import contextlib
import hashlib
import pathlib
import signal
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import yaml

from devkit import fixturehub
from devkit.realnode import deploy, objects, release_values, rig
from tests.integration.nodeplugin import csi_harness

pytestmark = [pytest.mark.integration, pytest.mark.root]

NAMESPACE = release_values.NAMESPACE
TENANT = "peer-a"
NODE_B = "node-b"
REPOSITORY = "e2e/peer"
FILES: dict[str, bytes | int] = {
    "config.json": b'{"model_type": "e2e", "hidden_size": 8}\n',
    "model.safetensors": 48 << 20,
    "tokenizer.json": 300_000,
}
SIZE = sum(len(c) if isinstance(c, bytes) else c for c in FILES.values())
PLACED = "e2e/placed"
PLACED_FILES: dict[str, bytes | int] = {"config.json": b'{"model_type": "placed"}\n',
                                        "model.safetensors": 1 << 20}
WARMUP_IMAGE = "localhost/model-manager-test/busybox:e2e"  # not :latest, so IfNotPresent
PEER_AUDIENCE = "model.csi.gpustack.ai/peer"
PEER_PORT_B = 32455
SECURE_PORT_B = 32454

_json = objects.json_of


@pytest.fixture(scope="module")
def release(cluster: rig.Rig, hub: fixturehub.Hub, timings: dict[str, float]) -> str:
    started = time.monotonic()
    subprocess.run(["ctr", "--address", rig.SOCK, "-n", "k8s.io", "images", "tag", "--force",
                    objects.BUSYBOX, WARMUP_IMAGE], check=True, capture_output=True)  # fmt: skip
    values: dict[str, Any] = release_values.values(hub, cluster)
    values["modelManager"]["peerSync"] = {"enabled": True}
    values["apiserver"]["controllers"] = {"prefetchWarmupImage": WARMUP_IMAGE}
    deploy.install(cluster, values, "values-peer.yaml")
    timings["helm install"] = time.monotonic() - started
    return release_values.RELEASE


@pytest.fixture(scope="module")
def installed(cluster: rig.Rig, hub: fixturehub.Hub, release: str) -> rig.Rig:
    hub.add_repo(REPOSITORY, FILES)
    cluster.kubectl("create", "namespace", TENANT)
    objects.wait_store_ready(cluster)
    return cluster


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return {}


def _store(cluster: rig.Rig, node: str) -> dict[str, Any]:
    got: dict[str, Any] = _json(cluster, "get", "nodemodelstores", node)
    return got


def _entry(cluster: rig.Rig, node: str, digest: str) -> dict[str, Any] | None:
    for entry in _store(cluster, node).get("status", {}).get("models") or []:
        if entry.get("digest") == digest:
            return dict(entry)
    return None


def _prefetch(cluster: rig.Rig) -> dict[str, Any]:
    got: dict[str, Any] = _json(cluster, "get", "modelprefetches", "warm", "-n", TENANT)
    return got


def _grant(cluster: rig.Rig) -> None:
    """The administrator's pool layer: every node in one ModelStore, TENANT granted it with the
    right to pin (a prefetch is admitted only under a binding, docs/api.md)."""
    objects.grant(cluster, TENANT)

    def merged() -> bool:
        store = _store(cluster, cluster.node_name)
        return bool(store.get("spec", {}).get("store") == objects.STORE)

    cluster.wait("node A's store merged from all-nodes", merged, timeout=120)


# --- 1. a ModelPrefetch warms the real node ---------------------------------------------------


def test_prefetch_warms_the_real_node(installed: rig.Rig, hub: fixturehub.Hub,
                                      state: dict[str, Any]) -> None:  # fmt: skip
    attributes = objects.artifact(installed, TENANT, "peer", REPOSITORY)
    digest = attributes["manifestDigest"]
    state.update(attributes=attributes, digest=digest)
    node_a = installed.node_name
    _grant(installed)
    installed.apply(textwrap.dedent(f"""\
        apiVersion: worker.gpustack.ai/v1
        kind: ModelPrefetch
        metadata: {{name: warm, namespace: {TENANT}}}
        spec:
          artifactRef: {{name: peer}}
          bindingRef: {{name: grant}}
          placement:
            nodeSelector:
              matchLabels: {{kubernetes.io/hostname: {node_a}}}
          retention: {{pinned: true}}
        """))  # fmt: skip

    def ready() -> dict[str, Any] | None:
        got = _prefetch(installed)
        done = got.get("status", {}).get("readyNodes") == 1
        pinned = digest in (_store(installed, node_a)["spec"].get("pinned") or [])
        return got if done and pinned else None

    prefetch = installed.wait("ModelPrefetch warm: node A Ready and pinned", ready, timeout=240,
                              namespace=TENANT)  # fmt: skip
    assert isinstance(prefetch, dict)
    assert objects.condition(prefetch, "Available") == "True", prefetch["status"]
    assert prefetch["status"]["desiredNodes"] == 1 and "nodes" not in prefetch["status"]
    # delivered through a warm-up Pod on the node (a real mount), from the hub: one copy
    served = hub.bytes_served(REPOSITORY)
    assert served == SIZE, served
    state["served"] = served
    store = _store(installed, node_a)
    assert digest in (store["spec"].get("pinned") or []), store["spec"]
    entry = _entry(installed, node_a, digest)
    assert entry is not None and entry["state"] == "Ready" and entry["source"] == "Hub", entry
    url = store["status"]["peer"]["url"]
    assert url.startswith("https://10.244.0.") and url.endswith(":32445"), url
    state["peer_url"] = url


# --- 1b. warm-up Pods go where the scheduler would put a tenant's Pod --------------------------


def _placed_status(cluster: rig.Rig) -> dict[str, Any]:
    got = _json(cluster, "get", "modelprefetches", "placed", "-n", TENANT)
    return dict(got.get("status") or {})


def _degraded(status: dict[str, Any]) -> str:
    found = [c for c in status.get("conditions") or [] if c["type"] == "Degraded"]
    return str(found[0]["message"]) if found else ""


def _warmup_pods(cluster: rig.Rig) -> list[dict[str, Any]]:
    pods = _json(cluster, "get", "pods", "-n", TENANT)["items"]
    return [p for p in pods if p["metadata"]["name"].startswith("placed-warmup-")]


def test_warm_up_pods_meet_taints_and_cordons(installed: rig.Rig, hub: fixturehub.Hub) -> None:
    hub.add_repo(PLACED, PLACED_FILES)
    objects.artifact(installed, TENANT, "placed", PLACED)
    node = installed.node_name
    taint = "dedicated=e2e:NoSchedule"
    try:
        # a taint the plugin tolerates only by its wildcard: no warm-up Pod, and the status says
        installed.kubectl("taint", "node", node, taint)
        installed.apply(textwrap.dedent(f"""\
            apiVersion: worker.gpustack.ai/v1
            kind: ModelPrefetch
            metadata: {{name: placed, namespace: {TENANT}}}
            spec:
              artifactRef: {{name: placed}}
              bindingRef: {{name: grant}}
              placement:
                nodeSelector:
                  matchLabels: {{kubernetes.io/hostname: {node}}}
            """))  # fmt: skip
        held = installed.wait(
            "the tainted node counted TaintNotTolerated",
            lambda: (s := _placed_status(installed)).get("failedNodes") == 1
            and "TaintNotTolerated (1)" in _degraded(s) and s,
            timeout=120, namespace=TENANT)  # fmt: skip
        assert isinstance(held, dict) and node not in _degraded(held), held  # no node named
        assert _warmup_pods(installed) == []
        # cordoned instead: a Pod is made, and kube-scheduler refuses it
        installed.kubectl("cordon", node)
        installed.kubectl("taint", "node", node, f"{taint}-")
        refused = installed.wait(
            "the cordoned node counted Unschedulable",
            lambda: "Unschedulable (1)" in _degraded(s := _placed_status(installed)) and s,
            timeout=180, namespace=TENANT)  # fmt: skip
        assert isinstance(refused, dict) and refused["failedNodes"] == 1, refused
        (pod,) = _warmup_pods(installed)
        assert "nodeName" not in pod["spec"] and pod["status"]["phase"] == "Pending", pod
        # none of the plugin's: only what DefaultTolerationSeconds adds to every Pod
        assert {(t.get("key"), t.get("effect")) for t in pod["spec"].get("tolerations") or []} <= {
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute")}, pod["spec"]["tolerations"]
        # uncordoned: the scheduler places the same Pod and the node warms
        installed.kubectl("uncordon", node)

        def ready() -> dict[str, Any] | None:
            found = _placed_status(installed)
            return found if found.get("readyNodes") == 1 else None

        installed.wait("the uncordoned node Ready", ready, timeout=240, namespace=TENANT)
        (placed,) = _warmup_pods(installed)
        assert placed["spec"]["nodeName"] == node  # bound by the scheduler
    finally:
        installed.kubectl("taint", "node", node, f"{taint}-", check=False)
        installed.kubectl("uncordon", node, check=False)
        installed.kubectl("delete", "modelprefetches", "placed", "-n", TENANT, "--wait=false",
                          check=False)  # fmt: skip


# --- 2. a second node pulls it from node A ------------------------------------------------------


@pytest.fixture(scope="module")
def node_b(installed: rig.Rig, state: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """node-b's objects, its plugin's tokens and kubeconfig, and the plugin on the host."""
    base = installed.work / "node-b"
    base.mkdir(parents=True, exist_ok=True)
    account = _json(installed, "get", "daemonset", "-n", NAMESPACE,
                    f"{release_values.RELEASE}-node")["spec"]["template"]["spec"][
                        "serviceAccountName"]  # fmt: skip
    installed.apply(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Node
        metadata: {{name: {NODE_B}, labels: {{kubernetes.io/hostname: {NODE_B}}}}}
        ---
        apiVersion: storage.k8s.io/v1
        kind: CSINode
        metadata: {{name: {NODE_B}}}
        spec:
          drivers: [{{name: {objects.DRIVER}, nodeID: {NODE_B}}}]
        ---
        apiVersion: v1
        kind: Pod
        metadata: {{name: node-b-plugin, namespace: {NAMESPACE}}}
        spec:
          nodeName: {NODE_B}
          serviceAccountName: {account}
          tolerations: [{{operator: Exists}}]
          containers: [{{name: plugin, image: {objects.BUSYBOX}, imagePullPolicy: Never}}]
        """))  # fmt: skip
    installed.wait("node-b's NodeModelStore kept by the worker",
                   lambda: _store(installed, NODE_B)["metadata"]["name"] == NODE_B,
                   timeout=120, namespace=NAMESPACE)  # fmt: skip

    def token(*audience: str) -> str:
        args = ["create", "token", account, "-n", NAMESPACE, "--duration", "1h",
                "--bound-object-kind", "Pod", "--bound-object-name", "node-b-plugin"]
        args += [f"--audience={a}" for a in audience]
        return installed.kubectl(*args).stdout.strip()

    config = yaml.safe_load(installed.kubeconfig.read_text())
    cluster_entry = next(c for c in config["clusters"])
    kubeconfig = base / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster_entry],
        "users": [{"name": "node-b", "user": {"token": token()}}],
        "contexts": [{"name": "node-b", "context": {"cluster": cluster_entry["name"],
                                                    "user": "node-b"}}],
        "current-context": "node-b"}))  # fmt: skip
    peer_token = base / "peer-token"
    peer_token.write_text(token(PEER_AUDIENCE))
    kubelet_dir = base / "kubelet"
    kubelet_dir.mkdir(exist_ok=True)
    socket = base / "csi.sock"
    argv = [sys.executable, "-m", "nodeplugin", "--node-name", NODE_B,
            "--endpoint", f"unix://{socket}", "--root", str(base / "cache"),
            "--kubelet-dir", str(kubelet_dir), "--kubeconfig", str(kubeconfig),
            "--namespace", NAMESPACE, "--bind-address", rig.NODE_IP,
            "--secure-port", str(SECURE_PORT_B), "--peer-port", str(PEER_PORT_B),
            "--peer-user", f"system:serviceaccount:{NAMESPACE}:{account}",
            "--peer-token-file", str(peer_token), "--peer-advertise-address", rig.NODE_IP,
            "--log-level", "INFO"]  # fmt: skip
    log = (base / "plugin.log").open("ab")
    process = subprocess.Popen(argv, cwd=rig.REPO, stdout=log, stderr=subprocess.STDOUT)
    kubelet = csi_harness.Kubelet(socket, kubelet_dir)
    try:
        yield {"base": base, "kubelet": kubelet, "account": account, "process": process}
    finally:
        kubelet.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(30)
        if process.poll() is None:
            process.kill()
        log.close()
        csi_harness.unmount_all_under(base)
        installed.kubectl("delete", "pod", "-n", NAMESPACE, "node-b-plugin", "--force",
                          "--grace-period=0", check=False)  # fmt: skip
        installed.kubectl("delete", "node", NODE_B, "--wait=false", check=False)
        print("\n[node-b] plugin log (last 30 lines):\n" + "\n".join(
            (base / "plugin.log").read_text(errors="replace").splitlines()[-30:]),
            file=sys.stderr)  # fmt: skip


def test_second_node_pulls_from_the_first(installed: rig.Rig, hub: fixturehub.Hub,
                                          node_b: dict[str, Any],
                                          state: dict[str, Any]) -> None:  # fmt: skip
    digest = state["digest"]

    def store_ready() -> bool:
        return objects.condition(_store(installed, NODE_B), "Ready") == "True"

    installed.wait("node-b's plugin reports its store Ready", store_ready, timeout=120,
                   namespace=NAMESPACE)  # fmt: skip
    kubelet: csi_harness.Kubelet = node_b["kubelet"]
    pod_uid = "b0000000-0000-4000-8000-000000000001"
    request = kubelet.publish_request(namespace=TENANT, pod_uid=pod_uid,
                                      attributes=state["attributes"])  # fmt: skip
    code, message = kubelet.publish_once_seen(request, timeout=60)
    if code in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE):
        code, message = kubelet.publish_until_ok(request, timeout=240)[-1]
    assert code == grpc.StatusCode.OK, message
    target = pathlib.Path(request.target_path)
    for path in FILES:
        seen = hashlib.sha256((target / path).read_bytes()).hexdigest()
        assert seen == hub.content(REPOSITORY, path).sha256, path
    with pytest.raises(OSError):
        (target / "probe").write_text("x")
    # every byte came from node A: the hub served nothing more
    assert hub.bytes_served(REPOSITORY) == state["served"]

    def reported() -> dict[str, Any] | None:
        entry = _entry(installed, NODE_B, digest)
        return entry if entry is not None and entry.get("state") == "Ready" else None

    entry = installed.wait("node-b's store lists the digest Ready", reported, timeout=120,
                           namespace=NAMESPACE)  # fmt: skip
    assert isinstance(entry, dict)
    assert entry["source"] == "Peer", entry
    kubelet.node.NodeUnpublishVolume(csi_harness.csi_pb2.NodeUnpublishVolumeRequest(
        volume_id=request.volume_id, target_path=request.target_path), timeout=30)  # fmt: skip


# --- 3. the peer port answers plugins only --------------------------------------------------


def _peer_get(url: str, token: str) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the peer's answers are bound by digest, not by its name
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=20) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_peer_port_refuses_a_tenant(installed: rig.Rig, node_b: dict[str, Any],
                                    state: dict[str, Any]) -> None:  # fmt: skip
    url = state["peer_url"] + "/peer/v1/trees/" + state["digest"].split(":", 1)[1]
    tenant = installed.kubectl("create", "token", "default", "-n", TENANT,
                               f"--audience={PEER_AUDIENCE}").stdout.strip()  # fmt: skip
    assert _peer_get(url, tenant) == 403
    # the same request with the plugins' own ServiceAccount (a positive control)
    plugin = installed.kubectl("create", "token", node_b["account"], "-n", NAMESPACE,
                               f"--audience={PEER_AUDIENCE}").stdout.strip()  # fmt: skip
    assert _peer_get(url, plugin) == 200
    # a plugin token for the API server's audience is not a peer token
    api = installed.kubectl("create", "token", node_b["account"], "-n", NAMESPACE).stdout.strip()
    assert _peer_get(url, api) == 401


# --- 4. deleting the prefetch withdraws the pin ----------------------------------------------


def test_deleting_the_prefetch_unpins(installed: rig.Rig, state: dict[str, Any]) -> None:
    installed.kubectl("delete", "modelprefetches", "warm", "-n", TENANT, "--timeout=60s")

    def unpinned() -> bool:
        spec = _store(installed, installed.node_name)["spec"]
        return state["digest"] not in (spec.get("pinned") or [])

    installed.wait("node A's spec.pinned without the digest", unpinned, timeout=120,
                   namespace=NAMESPACE)  # fmt: skip

    def no_warmup_pods() -> bool:
        pods = _json(installed, "get", "pods", "-n", TENANT)["items"]
        return not any(p["metadata"]["name"].startswith("warm") for p in pods)

    installed.wait("the warm-up Pod gone with its prefetch", no_warmup_pods, timeout=120,
                   namespace=TENANT)  # fmt: skip
    # the tree stays until collection needs the room (tests/integration/nodeplugin's
    # test_collection reclaims a withdrawn pin's bytes)
    entry = _entry(installed, installed.node_name, state["digest"])
    assert entry is not None and entry["state"] == "Ready", entry

