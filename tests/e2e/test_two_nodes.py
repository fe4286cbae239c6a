"""Two real nodes (issue 37): the rig's node A and ``vm2`` (``node-ns-up``: its own network and
mount namespaces, containerd, kubelet and cache directory, joining the same kube-apiserver; the
chart's DaemonSet runs a plugin on each). One cluster for the module, in two parts, in order;
skipped, naming what is missing, where the machine has no ``node-ns-up``.

1. Pods land where the weights are. A ModelPrefetch warms A; ten Pods naming only the artifact,
   with room on both nodes, each get the filled attributes and the preferred term, all run on
   A, and the hub serves no byte. With A cordoned ten more run on B, which downloads the model
   once from the hub (node-to-node sync is off in this part).
2. Node-to-node sync (issue 22). The release is upgraded with ``modelManager.peerSync.enabled``
   (each plugin restarts with a peer port and publishes it in its store's ``status.peer.url``).
   A ModelPrefetch warms A through a warm-up Pod (placed by kube-scheduler through node
   affinity, mounted through kubelet), then a Pod on B mounts the artifact and reads the hub's
   bytes, which B's plugin pulled from A's peer port (found in A's store; reached from B's
   network namespace over the routed Pod network): the hub served no second copy and B's store
   says ``source: Peer``. Between the two, warm-up Pods meet the real scheduler's rules (issue
   35): a tainted node gets none, a cordoned one a Pod the scheduler refuses (said in the
   prefetch's status) and warms once uncordoned. The peer port answers the plugins only, and
   deleting the prefetch withdraws its pin."""

from __future__ import annotations

import copy
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from devkit import fixturehub
from devkit.realnode import deploy, objects, release_values, rig, twonodes
from openapi import placement

pytestmark = [pytest.mark.integration, pytest.mark.root]

TENANT = "place-a"
ARTIFACT = "placed"
REPOSITORY = "e2e/two-nodes"
FILES: dict[str, bytes | int] = {"config.json": b'{"model_type": "two-nodes"}\n',
                                 "model.safetensors": 4 << 20}
SIZE = sum(len(c) if isinstance(c, bytes) else c for c in FILES.values())
REPLICAS = 10
NODE_B = twonodes.NODE_B

_json = objects.json_of


@pytest.fixture(scope="module")
def cluster(images: dict[str, Any], timings: dict[str, float]) -> Iterator[rig.Rig]:
    lacking = rig.missing_more_nodes()
    if lacking:
        pytest.skip("a second real node needs: " + ", ".join(lacking))
    node = rig.Rig()
    try:
        twonodes.up(node, images, timings)
        yield node
    finally:
        started = time.monotonic()
        node.down()
        timings["down"] = time.monotonic() - started
        print("\n[e2e two nodes] timings (s): "
              + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()), file=sys.stderr)


@pytest.fixture(scope="module")
def chart_values(cluster: rig.Rig, hub: fixturehub.Hub) -> dict[str, Any]:
    return twonodes.values(hub, cluster)


@pytest.fixture(scope="module")
def release(cluster: rig.Rig, chart_values: dict[str, Any], timings: dict[str, float]) -> str:
    started = time.monotonic()
    deploy.install(cluster, chart_values, "values-two-nodes.yaml")
    timings["helm install"] = time.monotonic() - started
    return release_values.RELEASE


@pytest.fixture(scope="module")
def installed(cluster: rig.Rig, hub: fixturehub.Hub, release: str) -> rig.Rig:
    hub.add_repo(REPOSITORY, FILES)
    twonodes.wait_both_ready(cluster)
    cluster.kubectl("create", "namespace", TENANT)
    return cluster


def _replica(name: str) -> str:
    return objects.pod(name, TENANT, "cat /models/config.json && exec sleep 3600",
                       attributes={"artifact": ARTIFACT}, label="placed")


def _placed(cluster: rig.Rig, names: list[str]) -> dict[str, str]:
    """Each Pod's node once all run."""
    def running() -> dict[str, str] | None:
        pods = {p["metadata"]["name"]: p for p in _json(
            cluster, "get", "pods", "-n", TENANT, "-l", "e2e=placed")["items"]}
        if not all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names):
            return None
        return {n: pods[n]["spec"]["nodeName"] for n in names}

    found = cluster.wait(f"{len(names)} Pods Running", running, timeout=240, namespace=TENANT)
    assert isinstance(found, dict)
    return found


def test_ten_pods_naming_only_the_artifact_run_on_the_warm_node(
        installed: rig.Rig, hub: fixturehub.Hub) -> None:
    node_a, node_b = installed.node_name, installed.extra[NODE_B]
    attributes = objects.artifact(installed, TENANT, ARTIFACT, REPOSITORY)
    twonodes.prefetch(installed, TENANT, "warm", ARTIFACT, node_a)
    served = hub.bytes_served(REPOSITORY)
    assert served == SIZE, served
    names = [f"on-a-{i}" for i in range(REPLICAS)]
    for name in names:
        installed.apply(_replica(name))
    for name in names:
        pod = _json(installed, "get", "pod", name, "-n", TENANT)
        [model] = [v for v in pod["spec"]["volumes"] if v.get("csi")]
        assert model["csi"]["volumeAttributes"] == attributes
        assert pod["spec"]["affinity"]["nodeAffinity"][placement.PREFERRED] == [
            placement.preferred_term([node_a])]
    assert set(_placed(installed, names).values()) == {node_a}, node_b
    assert hub.bytes_served(REPOSITORY) == served  # no hub byte for ten Pods


def test_with_the_warm_node_cordoned_they_run_on_the_other_which_downloads_once(
        installed: rig.Rig, hub: fixturehub.Hub) -> None:
    node_a, node_b = installed.node_name, installed.extra[NODE_B]
    served = hub.bytes_served(REPOSITORY)
    installed.kubectl("cordon", node_a)
    try:
        names = [f"on-b-{i}" for i in range(REPLICAS)]
        for name in names:
            installed.apply(_replica(name))
        assert set(_placed(installed, names).values()) == {node_b}
        assert hub.bytes_served(REPOSITORY) == served + SIZE  # one copy, for ten Pods
    finally:
        installed.kubectl("uncordon", node_a)


# --- 2. node-to-node sync between the two kubelets -------------------------------------------

PEER_TENANT = "peer-a"
PEER_REPOSITORY = "e2e/peer"
PEER_FILES: dict[str, bytes | int] = {
    "config.json": b'{"model_type": "e2e", "hidden_size": 8}\n',
    "model.safetensors": 48 << 20,
    "tokenizer.json": 300_000,
}
PEER_SIZE = sum(len(c) if isinstance(c, bytes) else c for c in PEER_FILES.values())
TAINTED = "e2e/placed"
TAINTED_FILES: dict[str, bytes | int] = {"config.json": b'{"model_type": "placed"}\n',
                                         "model.safetensors": 1 << 20}
PEER_AUDIENCE = "model.csi.gpustack.ai/peer"


@pytest.fixture(scope="module")
def peer_sync(installed: rig.Rig, hub: fixturehub.Hub, chart_values: dict[str, Any],
              timings: dict[str, float]) -> rig.Rig:
    """The release upgraded with ``modelManager.peerSync.enabled``, once part 1 is done (its
    second node downloads from the hub): both plugins restarted, each publishing its peer URL."""
    started = time.monotonic()
    values = copy.deepcopy(chart_values)
    values["modelManager"]["peerSync"] = {"enabled": True}
    deploy.upgrade(installed, values, "values-peer.yaml")
    twonodes.wait_peers(installed)
    timings["helm upgrade (peer sync)"] = time.monotonic() - started
    hub.add_repo(PEER_REPOSITORY, PEER_FILES)
    installed.kubectl("create", "namespace", PEER_TENANT)
    return installed


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


def _status(cluster: rig.Rig, name: str) -> dict[str, Any]:
    got = _json(cluster, "get", "modelprefetches", name, "-n", PEER_TENANT)
    return dict(got.get("status") or {})


def test_prefetch_warms_node_a_from_the_hub(peer_sync: rig.Rig, hub: fixturehub.Hub,
                                            state: dict[str, Any]) -> None:  # fmt: skip
    cluster = peer_sync
    node_a = cluster.node_name
    attributes = objects.artifact(cluster, PEER_TENANT, "peer", PEER_REPOSITORY)
    digest = attributes["manifestDigest"]
    state.update(attributes=attributes, digest=digest)
    objects.grant(cluster, PEER_TENANT)
    cluster.wait("node A's store merged from all-nodes",
                 lambda: _store(cluster, node_a).get("spec", {}).get("store") == objects.STORE,
                 timeout=120)  # fmt: skip
    cluster.apply(objects.prefetch_manifest(PEER_TENANT, "warm", "peer", node_a, pinned=True))

    def ready() -> dict[str, Any] | None:
        got = _json(cluster, "get", "modelprefetches", "warm", "-n", PEER_TENANT)
        done = got.get("status", {}).get("readyNodes") == 1
        pinned = digest in (_store(cluster, node_a)["spec"].get("pinned") or [])
        return got if done and pinned else None

    prefetch = cluster.wait("ModelPrefetch warm: node A Ready and pinned", ready, timeout=240,
                            namespace=PEER_TENANT)  # fmt: skip
    assert isinstance(prefetch, dict)
    assert objects.condition(prefetch, "Available") == "True", prefetch["status"]
    assert prefetch["status"]["desiredNodes"] == 1 and "nodes" not in prefetch["status"]
    # delivered through a warm-up Pod on node A (a real mount), from the hub: one copy
    served = hub.bytes_served(PEER_REPOSITORY)
    assert served == PEER_SIZE, served
    state["served"] = served
    entry = _entry(cluster, node_a, digest)
    assert entry is not None and entry["state"] == "Ready" and entry["source"] == "Hub", entry
    assert _entry(cluster, cluster.extra[NODE_B], digest) is None  # B is cold
    url = _store(cluster, node_a)["status"]["peer"]["url"]
    assert url.startswith("https://10.244.0.") and url.endswith(":32445"), url  # A's Pod IP
    state["peer_url"] = url


def _warmup_pods(cluster: rig.Rig) -> list[dict[str, Any]]:
    pods = _json(cluster, "get", "pods", "-n", PEER_TENANT)["items"]
    return [p for p in pods if p["metadata"]["name"].startswith("placed-warmup-")]


def _degraded(status: dict[str, Any]) -> str:
    found = [c for c in status.get("conditions") or [] if c["type"] == "Degraded"]
    return str(found[0]["message"]) if found else ""


def test_warm_up_pods_meet_taints_and_cordons(peer_sync: rig.Rig, hub: fixturehub.Hub) -> None:
    cluster = peer_sync
    hub.add_repo(TAINTED, TAINTED_FILES)
    objects.artifact(cluster, PEER_TENANT, "placed", TAINTED)
    node = cluster.node_name
    taint = "dedicated=e2e:NoSchedule"
    try:
        # a taint the plugin tolerates only by its wildcard: no warm-up Pod, and the status says
        cluster.kubectl("taint", "node", node, taint)
        cluster.apply(objects.prefetch_manifest(PEER_TENANT, "placed", "placed", node))
        held = cluster.wait(
            "the tainted node counted TaintNotTolerated",
            lambda: (s := _status(cluster, "placed")).get("failedNodes") == 1
            and "TaintNotTolerated (1)" in _degraded(s) and s,
            timeout=120, namespace=PEER_TENANT)  # fmt: skip
        assert isinstance(held, dict) and node not in _degraded(held), held  # no node named
        assert _warmup_pods(cluster) == []
        # cordoned instead: a Pod is made, and kube-scheduler refuses it
        cluster.kubectl("cordon", node)
        cluster.kubectl("taint", "node", node, f"{taint}-")
        refused = cluster.wait(
            "the cordoned node counted Unschedulable",
            lambda: "Unschedulable (1)" in _degraded(s := _status(cluster, "placed")) and s,
            timeout=180, namespace=PEER_TENANT)  # fmt: skip
        assert isinstance(refused, dict) and refused["failedNodes"] == 1, refused
        (pod,) = _warmup_pods(cluster)
        assert "nodeName" not in pod["spec"] and pod["status"]["phase"] == "Pending", pod
        # none of the plugin's: only what DefaultTolerationSeconds adds to every Pod
        assert {(t.get("key"), t.get("effect")) for t in pod["spec"].get("tolerations") or []} <= {
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute")}, pod["spec"]["tolerations"]
        # uncordoned: the scheduler places the same Pod and the node warms
        cluster.kubectl("uncordon", node)
        cluster.wait("the uncordoned node Ready",
                     lambda: _status(cluster, "placed").get("readyNodes") == 1,
                     timeout=240, namespace=PEER_TENANT)  # fmt: skip
        (placed,) = _warmup_pods(cluster)
        assert placed["spec"]["nodeName"] == node  # bound by the scheduler
    finally:
        cluster.kubectl("taint", "node", node, f"{taint}-", check=False)
        cluster.kubectl("uncordon", node, check=False)
        cluster.kubectl("delete", "modelprefetches", "placed", "-n", PEER_TENANT, "--wait=false",
                        check=False)  # fmt: skip


def test_a_pod_on_node_b_reads_bytes_node_b_pulled_from_node_a(
        peer_sync: rig.Rig, hub: fixturehub.Hub, state: dict[str, Any]) -> None:
    cluster = peer_sync
    node_b = cluster.extra[NODE_B]
    # no readOnly on the volumeMount: EROFS must come from B's plugin's own mount
    script = ("cd /models && sha256sum " + " ".join(sorted(PEER_FILES)) + " && echo '--- write'"
              " && (echo x > /models/probe) 2>&1; echo \"--- done $?\"; exec sleep 3600")
    cluster.apply(objects.pod("on-b", PEER_TENANT, script, attributes=state["attributes"],
                              read_only=False, node=node_b))  # fmt: skip

    def read() -> str | None:
        out = cluster.kubectl("logs", "-n", PEER_TENANT, "on-b", check=False).stdout
        return out if "--- done" in out else None

    out = cluster.wait("the Pod on node B read the model", read, timeout=300,
                       namespace=PEER_TENANT)  # fmt: skip
    assert isinstance(out, str)
    pod = _json(cluster, "get", "pod", "on-b", "-n", PEER_TENANT)
    assert pod["spec"]["nodeName"] == node_b, pod["spec"]  # mounted through B's own kubelet
    listing, _, rest = out.partition("--- write")
    rows = [line.split(maxsplit=1) for line in listing.strip().splitlines()]
    seen = {path: digest for digest, path in rows}
    want = {path: hub.content(PEER_REPOSITORY, path).sha256 for path in PEER_FILES}
    assert seen == want, out
    assert "Read-only file system" in rest, out
    # every byte came from node A: the hub served nothing more
    assert hub.bytes_served(PEER_REPOSITORY) == state["served"]

    def reported() -> dict[str, Any] | None:
        entry = _entry(cluster, node_b, state["digest"])
        return entry if entry is not None and entry.get("state") == "Ready" else None

    entry = cluster.wait("node B's store lists the digest Ready", reported, timeout=120,
                         namespace=PEER_TENANT)  # fmt: skip
    assert isinstance(entry, dict)
    assert entry["source"] == "Peer", entry
    assert hub.bytes_served(PEER_REPOSITORY) == state["served"]


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


def test_peer_port_refuses_a_tenant(peer_sync: rig.Rig, state: dict[str, Any]) -> None:
    cluster = peer_sync
    namespace = release_values.NAMESPACE
    account = _json(cluster, "get", "daemonset", "-n", namespace,
                    f"{release_values.RELEASE}-node")["spec"]["template"]["spec"][
                        "serviceAccountName"]  # fmt: skip
    url = state["peer_url"] + "/peer/v1/trees/" + state["digest"].split(":", 1)[1]
    tenant = cluster.kubectl("create", "token", "default", "-n", PEER_TENANT,
                             f"--audience={PEER_AUDIENCE}").stdout.strip()  # fmt: skip
    assert _peer_get(url, tenant) == 403
    # the same request with the plugins' own ServiceAccount (a positive control)
    plugin = cluster.kubectl("create", "token", account, "-n", namespace,
                             f"--audience={PEER_AUDIENCE}").stdout.strip()  # fmt: skip
    assert _peer_get(url, plugin) == 200
    # a plugin token for the API server's audience is not a peer token
    api = cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()
    assert _peer_get(url, api) == 401


def test_deleting_the_prefetch_unpins(peer_sync: rig.Rig, state: dict[str, Any]) -> None:
    cluster = peer_sync
    node_a = cluster.node_name
    cluster.kubectl("delete", "modelprefetches", "warm", "-n", PEER_TENANT, "--timeout=60s")
    cluster.wait("node A's spec.pinned without the digest",
                 lambda: state["digest"] not in (_store(cluster, node_a)["spec"].get("pinned")
                                                 or []),
                 timeout=120, namespace=release_values.NAMESPACE)  # fmt: skip

    def no_warmup_pods() -> bool:
        pods = _json(cluster, "get", "pods", "-n", PEER_TENANT)["items"]
        return not any(p["metadata"]["name"].startswith("warm") for p in pods)

    cluster.wait("the warm-up Pod gone with its prefetch", no_warmup_pods, timeout=120,
                 namespace=PEER_TENANT)  # fmt: skip
    # the tree stays until collection needs the room (tests/integration/nodeplugin's
    # test_collection reclaims a withdrawn pin's bytes)
    entry = _entry(cluster, node_a, state["digest"])
    assert entry is not None and entry["state"] == "Ready", entry
