"""model-manager installed with its chart on a real one-node cluster (``devkit/realnode``):
the images ``make image`` builds, kube-apiserver's aggregator, a real kubelet calling the CSI
plugin through its plugin registry, Pods reading the mounted weights, and the pool layer (a
binding's budget and usage, a pool's download limit seen at the hub, the node stores leaving
with the CSIDriver). The steps run in order and share one cluster; each waits generously and
fails with the cluster's pods, events and logs."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import textwrap
import threading
import time
from typing import Any

import pytest
import yaml

from devkit import fixturehub, helm
from devkit.realnode import objects, rig
from devkit.realnode.release_values import NAMESPACE, RELEASE
from openapi import keys, placement, reasons
from openapi import plugin as plugin_api

pytestmark = [pytest.mark.integration, pytest.mark.root]

DRIVER = objects.DRIVER
TENANT = "team-a"
OTHER = "team-b"
ARTIFACT = "tiny"
REPOSITORY = "e2e/tiny"
COLD_REPOSITORY = "e2e/cold"
FILES: dict[str, bytes | int] = {
    "config.json": b'{"model_type": "e2e", "hidden_size": 8}\n',
    "tokenizer.json": b'{"version": "1.0", "vocab": {"a": 0, "b": 1}}\n',
    "model.safetensors": 6 << 20,
    "nested/part-00001.bin": 1 << 20,
}


_json = objects.json_of
_condition = objects.condition


def _reader_pod(name: str, namespace: str, attributes: dict[str, str]) -> str:
    # no readOnly on the volumeMount: EROFS must come from the plugin's own mount
    script = ("cd /models && find . -type f | sort | xargs sha256sum && echo '--- write' && "
              "(echo x > /models/probe) 2>&1; echo \"--- done $?\"; exec sleep 3600")
    return objects.pod(name, namespace, script, attributes=attributes, read_only=False)


@pytest.fixture(scope="module")
def installed(cluster: rig.Rig, hub: fixturehub.Hub, release: str) -> rig.Rig:
    hub.add_repo(REPOSITORY, FILES)
    return cluster


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return {}


def test_apiservice_available(installed: rig.Rig) -> None:
    def available() -> bool:
        service = _json(installed, "get", "apiservice", "v1.worker.gpustack.ai")
        return _condition(service, "Available") == "True"

    installed.wait("APIService v1.worker.gpustack.ai Available", available, timeout=240,
                   namespace=NAMESPACE)  # fmt: skip
    pod = _json(installed, "get", "pods", "-n", NAMESPACE, "-l",
                "app.kubernetes.io/component=apiserver")["items"][0]  # fmt: skip
    context = pod["spec"]["containers"][0]["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    # as it really runs: uid 65532, and the image's files cannot be written
    probe = ("import os\nprint(os.getuid())\ntry:\n    open('/opt/model-manager/probe', 'w')\n"
             "except OSError as e:\n    print(e.strerror)")  # fmt: skip
    done = installed.kubectl("exec", "-n", NAMESPACE, pod["metadata"]["name"], "--",
                             "python", "-c", probe)  # fmt: skip
    assert done.stdout.split("\n")[:2] == ["65532", "Read-only file system"], done.stdout


def test_driver_registered(installed: rig.Rig) -> None:
    def registered() -> bool:
        node = _json(installed, "get", "csinode", installed.node_name)
        return DRIVER in [d["name"] for d in node["spec"].get("drivers") or []]

    installed.wait(f"CSINode lists {DRIVER}", registered, timeout=180, namespace=NAMESPACE)


def test_node_store_ready(installed: rig.Rig) -> None:
    def ready() -> bool:
        store = _json(installed, "get", "nodemodelstores", installed.node_name)
        return _condition(store, "Ready") == "True"

    installed.wait("NodeModelStore Ready", ready, timeout=180, namespace=NAMESPACE)


def test_tenant_artifact_resolves(installed: rig.Rig, state: dict[str, Any]) -> None:
    installed.kubectl("create", "namespace", TENANT)
    installed.kubectl("create", "namespace", OTHER)
    installed.apply(textwrap.dedent(f"""\
        apiVersion: rbac.authorization.k8s.io/v1
        kind: Role
        metadata: {{name: model-artifact-user, namespace: {TENANT}}}
        rules:
          - apiGroups: [worker.gpustack.ai]
            resources: [modelartifacts, modelartifacts/progress]
            verbs: [get, list, watch, create]
        ---
        apiVersion: rbac.authorization.k8s.io/v1
        kind: RoleBinding
        metadata: {{name: alice, namespace: {TENANT}}}
        roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: model-artifact-user}}
        subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]
        """))
    state["attributes"] = objects.artifact(installed, TENANT, ARTIFACT, REPOSITORY, user="alice")


def _wait_running(cluster: rig.Rig, name: str, namespace: str) -> None:
    def running() -> bool:
        pod = _json(cluster, "get", "pod", name, "-n", namespace)
        return bool(pod["status"].get("phase") == "Running")

    cluster.wait(f"Pod {namespace}/{name} Running", running, timeout=240, namespace=namespace)


def _reader_output(cluster: rig.Rig, name: str, namespace: str) -> str:
    def done() -> str | None:
        out = cluster.kubectl("logs", "-n", namespace, name).stdout
        return out if "--- done" in out else None

    out = cluster.wait(f"Pod {namespace}/{name} read the model", done, timeout=120,
                       namespace=namespace)  # fmt: skip
    assert isinstance(out, str)
    return out


def test_consumer_reads_every_byte(installed: rig.Rig, hub: fixturehub.Hub,
                                   state: dict[str, Any]) -> None:  # fmt: skip
    installed.apply(_reader_pod("reader-1", TENANT, state["attributes"]))
    _wait_running(installed, "reader-1", TENANT)
    out = _reader_output(installed, "reader-1", TENANT)
    listing, _, rest = out.partition("--- write")
    seen = {}
    for line in listing.strip().splitlines():
        digest, path = line.split(maxsplit=1)
        seen[path.removeprefix("./")] = digest
    # the plugin's two markers: the canonical manifest (its digest is the artifact's) and the
    # digest the tree was published under
    assert seen.pop(".gpustack-manifest") == state["attributes"]["manifestDigest"].split(":")[1]
    assert seen.pop(".gpustack-digest"), out
    want = {path: hub.content(REPOSITORY, path).sha256 for path in FILES}
    assert seen == want, out
    assert "Read-only file system" in rest, out
    state["served"] = hub.bytes_served(REPOSITORY)
    assert state["served"] >= sum(len(c) if isinstance(c, bytes) else c for c in FILES.values())


def test_progress_through_the_aggregator(installed: rig.Rig, state: dict[str, Any]) -> None:
    path = (f"/apis/worker.gpustack.ai/v1/namespaces/{TENANT}/modelartifacts/{ARTIFACT}"
            "/progress")  # fmt: skip
    body = json.loads(installed.kubectl("get", "--raw", path, user="alice").stdout)
    assert body["kind"] == "ModelArtifactProgress", body
    assert body["manifestDigest"] == state["attributes"]["manifestDigest"], body
    # the one node holds it, nothing is downloading or failed
    assert (body["ready"], body["downloading"], body["failed"]) == (1, 0, 0), body
    total = sum(len(c) if isinstance(c, bytes) else c for c in FILES.values())
    assert body["sizeBytes"] == total, body


# run in the API server's container: each of its two projected tokens against the plugin's port,
# and the plugins' one against kube-apiserver; prints the status codes
_ASK_WITH_EACH_TOKEN = textwrap.dedent("""
    import json, os, ssl, sys, urllib.error, urllib.request
    def status(url, token_file):
        token = open(token_file).read().strip()
        ask = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
        try:
            with urllib.request.urlopen(ask, context=ssl._create_unverified_context(),
                                        timeout=20) as answer:
                return answer.status
        except urllib.error.HTTPError as refused:
            return refused.code
    api = "https://%s:%s/api" % (os.environ["KUBERNETES_SERVICE_HOST"],
                                 os.environ["KUBERNETES_SERVICE_PORT"])
    print(json.dumps({
        "plugin audience at the plugin": status(sys.argv[1], sys.argv[2]),
        "API token at the plugin": status(sys.argv[1], sys.argv[3]),
        "plugin audience at kube-apiserver": status(api, sys.argv[2])}))
""")


def test_the_worker_reads_the_plugin_with_a_token_only_the_plugins_accept(
        installed: rig.Rig) -> None:
    """The real kubelet projects the chart's ``plugin-token`` (audience
    ``model.csi.gpustack.ai/plugin``) into the API server's Pod; the plugin's TokenReview, by the
    real kube-apiserver, accepts it and refuses the worker's API token, and kube-apiserver
    refuses it as a credential: a node plugin has nothing of the worker's to replay."""
    plugin_pod = _json(installed, "get", "pods", "-n", NAMESPACE, "-l",
                       keys.PLUGIN_SELECTOR)["items"][0]
    url = f"https://{plugin_pod['status']['podIP']}:{plugin_api.DEFAULT_PORT}/model/downloads"
    server = _json(installed, "get", "pods", "-n", NAMESPACE, "-l",
                   f"{keys.COMPONENT}=apiserver")["items"][0]["metadata"]["name"]
    done = installed.kubectl(
        "exec", "-n", NAMESPACE, server, "-c", "apiserver", "--", "python", "-c",
        _ASK_WITH_EACH_TOKEN, url, plugin_api.TOKEN_FILE,
        "/var/run/secrets/kubernetes.io/serviceaccount/token", timeout=90)
    assert json.loads(done.stdout) == {"plugin audience at the plugin": 200,
                                       "API token at the plugin": 401,
                                       "plugin audience at kube-apiserver": 401}, done.stdout


def test_second_pod_downloads_nothing(installed: rig.Rig, hub: fixturehub.Hub,
                                      state: dict[str, Any]) -> None:  # fmt: skip
    installed.apply(_reader_pod("reader-2", TENANT, state["attributes"]))
    _wait_running(installed, "reader-2", TENANT)
    out = _reader_output(installed, "reader-2", TENANT)
    assert "Read-only file system" in out
    assert hub.bytes_served(REPOSITORY) == state["served"]


def test_a_pod_naming_only_its_artifact_is_filled_and_prefers_the_warm_node(
        installed: rig.Rig, hub: fixturehub.Hub, state: dict[str, Any]) -> None:
    """Through kube-apiserver's real webhook call (the chart's MutatingWebhookConfiguration,
    matchConditions, the CA bundle): the fill and prefer webhooks of the API server."""
    manifest = _reader_pod("named-only", TENANT, {"artifact": ARTIFACT})
    installed.apply(manifest, user="admin")
    pod = _json(installed, "get", "pod", "named-only", "-n", TENANT)
    [model] = [v for v in pod["spec"]["volumes"] if v.get("csi")]
    assert model["csi"]["volumeAttributes"] == state["attributes"]
    assert pod["spec"]["affinity"]["nodeAffinity"][placement.PREFERRED] == [
        placement.preferred_term([installed.node_name])]
    _wait_running(installed, "named-only", TENANT)
    assert "Read-only file system" in _reader_output(installed, "named-only", TENANT)
    assert hub.bytes_served(REPOSITORY) == state["served"]
    # the first reader was created before any node held the digest: it got no term
    plain = _json(installed, "get", "pod", "reader-1", "-n", TENANT)
    assert "affinity" not in plain["spec"]


def test_the_opt_in_waits_gated_until_a_prefetch_warms_the_node(installed: rig.Rig,
                                                                 hub: fixturehub.Hub) -> None:
    """A Pod that must run where its model is warm, while no node holds it: kube-apiserver's
    call to the prefer webhook gates it (Pending, SchedulingGated) and the warm-gate controller
    says why in an Event; a ModelPrefetch warms the node, the controller narrows the Pod's
    affinity to it and removes the gate, and the Pod starts and reads the weights."""
    hub.add_repo(COLD_REPOSITORY, {"config.json": b"{}"})
    attributes = objects.artifact(installed, TENANT, "cold", COLD_REPOSITORY)
    digest = attributes["manifestDigest"]
    manifest = _reader_pod("cold-only", TENANT, {"artifact": "cold"}).replace(
        "labels: {e2e: reader}}",
        f'labels: {{e2e: reader}}, annotations: {{"{keys.REQUIRE_WARM_NODE}": "true"}}}}')
    created = installed.kubectl("apply", "-f", "-", stdin=manifest)
    assert f"no node holds {digest} Ready yet" in created.stderr, created.stderr
    pod = _json(installed, "get", "pod", "cold-only", "-n", TENANT)
    assert pod["spec"]["schedulingGates"] == [{"name": keys.WARM_NODE_GATE}]
    assert pod["metadata"]["labels"][keys.WAITING_FOR_WARM_NODE] == "true"
    assert "nodeName" not in pod["spec"] and "affinity" not in pod["spec"]

    def waiting_event() -> str:
        found = _json(installed, "get", "events", "-n", TENANT, "--field-selector",
                      "involvedObject.name=cold-only")
        return next((e["message"] for e in found["items"]
                     if e["reason"] == reasons.WAITING_FOR_WARM_NODE), "")

    message = installed.wait("the Pod's WaitingForWarmNode Event", waiting_event, timeout=60,
                             namespace=TENANT)
    assert f"no node holds {digest} Ready yet" in str(message)
    still = _json(installed, "get", "pod", "cold-only", "-n", TENANT)
    assert still["status"]["phase"] == "Pending" and still["spec"]["schedulingGates"]
    node = installed.node_name
    objects.grant(installed, TENANT)
    installed.apply(objects.prefetch_manifest(TENANT, "cold", "cold", node))
    try:
        _wait_running(installed, "cold-only", TENANT)
        started = _json(installed, "get", "pod", "cold-only", "-n", TENANT)
        assert not started["spec"].get("schedulingGates")
        assert keys.WAITING_FOR_WARM_NODE not in started["metadata"]["labels"]
        assert started["spec"]["affinity"]["nodeAffinity"][placement.REQUIRED] == {
            "nodeSelectorTerms": [{"matchExpressions": [placement.expression([node])]}]}
        assert started["spec"]["nodeName"] == node
        assert "Read-only file system" in _reader_output(installed, "cold-only", TENANT)
    finally:
        installed.kubectl("delete", "pod", "cold-only", "-n", TENANT, "--wait=false",
                          check=False)
        installed.kubectl("delete", "modelprefetches", "cold", "-n", TENANT, "--wait=false",
                          check=False)


def _refused(cluster: rig.Rig, name: str, namespace: str, attributes: dict[str, str]) -> str:
    """Start a reader that must not mount; its FailedMount message, once it stays
    ContainerCreating."""
    cluster.apply(_reader_pod(name, namespace, attributes))
    message = objects.failed_mount(cluster, name, namespace, "PermissionDenied", timeout=120)
    cluster.kubectl("delete", "pod", name, "-n", namespace, "--wait=false")
    return message


def test_other_namespace_is_refused(installed: rig.Rig, state: dict[str, Any]) -> None:
    # the Pod also claims the tenant's namespace: kubelet writes the Pod's own over it
    forged = {**state["attributes"], "csi.storage.k8s.io/pod.namespace": TENANT}
    message = _refused(installed, "intruder", OTHER, forged)
    assert f"no ModelArtifact '{ARTIFACT}' in namespace '{OTHER}'" in message, message


def test_forged_digest_is_refused(installed: rig.Rig, state: dict[str, Any]) -> None:
    forged = {**state["attributes"], "manifestDigest": "sha256:" + "1" * 64}
    message = _refused(installed, "forger", TENANT, forged)
    assert f"not the volume's manifestDigest {forged['manifestDigest']}" in message, message


def test_roll_keeps_the_mount_readable(installed: rig.Rig) -> None:
    installed.kubectl("rollout", "restart", "-n", NAMESPACE, f"daemonset/{RELEASE}-node")
    installed.kubectl("rollout", "status", "-n", NAMESPACE, f"daemonset/{RELEASE}-node",
                      "--timeout=180s", timeout=200)  # fmt: skip
    done = installed.kubectl("exec", "-n", TENANT, "reader-1", "--", "sha256sum",
                             "/models/config.json")  # fmt: skip
    assert done.stdout.split()[0] == _sha256(FILES["config.json"])


def _pods(cluster: rig.Rig) -> dict[str, tuple[str, int]]:
    """Every Pod but the API server's and those being deleted, in the release's and the
    tenant's namespaces: its UID and its containers' restarts, by namespace/name."""
    found: dict[str, tuple[str, int]] = {}
    for namespace in (NAMESPACE, TENANT):
        for pod in _json(cluster, "get", "pods", "-n", namespace)["items"]:
            labels = pod["metadata"].get("labels") or {}
            if labels.get("app.kubernetes.io/component") == "apiserver":
                continue
            if pod["metadata"].get("deletionTimestamp"):
                continue  # going already (an earlier test's cleanup): not one that may restart
            restarts = sum(c.get("restartCount", 0)
                           for c in pod["status"].get("containerStatuses") or [])
            found[f"{namespace}/{pod['metadata']['name']}"] = (pod["metadata"]["uid"], restarts)
    return found


def _versions(cluster: rig.Rig) -> list[int]:
    """Every resourceVersion this test can see of our API: the lists' and their objects'."""
    seen = []
    for plural in ("modelartifacts", "nodemodelstores"):
        listed = json.loads(cluster.kubectl(
            "get", "--raw", f"/apis/worker.gpustack.ai/v1/{plural}").stdout)
        seen.append(int(listed["metadata"]["resourceVersion"]))
        seen += [int(item["metadata"]["resourceVersion"]) for item in listed["items"]]
    return seen


def test_an_emptydir_store_lost_with_its_pod_heals_without_restarting_anything(
        installed: rig.Rig, state: dict[str, Any]) -> None:
    """Issue 34: the release keeps its store in an emptyDir (the rig has no StorageClass), so
    deleting the API server's Pod starts a new one on an empty store. Within 60 s, with no
    other Pod restarted, the node plugin and the worker list again (the new server numbers
    above the mark the old one kept on its Lease, so the versions they held answer 410): the
    NodeModelStore is created again and its status written again, the tenant's artifact
    created again mounts in a new Pod, and no resourceVersion seen before is handed out
    again. reader-1 keeps reading throughout."""
    store_before = _json(installed, "get", "nodemodelstores", installed.node_name)
    assert any(m["digest"] == state["attributes"]["manifestDigest"]
               for m in store_before["status"].get("models") or []), store_before["status"]
    pods_before = _pods(installed)
    held = max(_versions(installed))
    server = _json(installed, "get", "pods", "-n", NAMESPACE, "-l",
                   "app.kubernetes.io/component=apiserver")["items"][0]["metadata"]["name"]
    started = time.monotonic()
    installed.kubectl("delete", "pod", "-n", NAMESPACE, server, "--wait=false")

    def left() -> float:
        """What is left of the 60 s the whole recovery may take."""
        remaining = 60 - (time.monotonic() - started)
        assert remaining > 0, "not healed within 60 s of the API server's Pod deleted"
        return remaining

    def store_back() -> dict[str, Any] | None:
        got: dict[str, Any] = _json(installed, "get", "nodemodelstores", installed.node_name)
        if got["metadata"]["uid"] == store_before["metadata"]["uid"]:
            return None
        held_digests = [m["digest"] for m in got.get("status", {}).get("models") or []]
        if state["attributes"]["manifestDigest"] not in held_digests:
            return None
        return got if _condition(got, "Ready") == "True" else None

    # the worker created the node's store again, and the plugin wrote its whole status on it
    store_after = installed.wait("the NodeModelStore created and its status written again",
                                 store_back, timeout=left(), namespace=NAMESPACE)
    assert isinstance(store_after, dict)
    # the tenant creates the artifact again (a new UID): a new Pod mounts it
    attributes = objects.artifact(installed, TENANT, ARTIFACT, REPOSITORY, user="alice")
    assert attributes["artifactUID"] != state["attributes"]["artifactUID"]
    assert attributes["manifestDigest"] == state["attributes"]["manifestDigest"]
    installed.apply(_reader_pod("reader-3", TENANT, attributes))
    installed.wait("reader-3 read the model", lambda: "--- done" in installed.kubectl(
        "logs", "-n", TENANT, "reader-3", check=False).stdout, timeout=left(), namespace=TENANT)
    assert left() > 0  # the artifact's own wait is not bounded by the 60 s: this is

    # nothing else was restarted, and reader-1 reads on
    after = _pods(installed)
    assert {k: v for k, v in after.items() if k in pods_before} == pods_before
    done = installed.kubectl("exec", "-n", TENANT, "reader-1", "--", "sha256sum",
                             "/models/config.json")  # fmt: skip
    assert done.stdout.split()[0] == _sha256(FILES["config.json"])
    # no version seen before the roll was handed out again
    assert min(_versions(installed)) > held
    assert int(store_after["metadata"]["resourceVersion"]) > held
    # and the server said why: its log, and an Event about its Lease
    logs = installed.kubectl("logs", "-n", NAMESPACE, "-l",
                             "app.kubernetes.io/component=apiserver", "--tail=-1").stdout
    assert "behind the revision mark" in logs, logs[-3000:]
    events = _json(installed, "get", "events", "-n", NAMESPACE, "--field-selector",
                   "reason=StoreWentBack")["items"]  # fmt: skip
    assert events and events[0]["involvedObject"]["kind"] == "Lease", events


def _sha256(data: bytes | int) -> str:
    import hashlib

    assert isinstance(data, bytes)
    return hashlib.sha256(data).hexdigest()


def _mounting_pods(cluster: rig.Rig) -> set[str]:
    """``namespace/name`` of every Pod the command the chart's notes print (and install.md gives)
    lists: the Pods with a volume of the driver, to delete before an uninstall."""
    done = helm.run("get", "notes", RELEASE, "--namespace", NAMESPACE,
                    "--kubeconfig", str(cluster.kubeconfig))  # fmt: skip
    assert done.returncode == 0, done.stderr
    [command] = [line.strip() for line in done.stdout.splitlines()
                 if line.strip().startswith("kubectl get pods -A -o custom-columns")]
    listed = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True,
                            text=True, timeout=60, check=False,
                            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)})
    assert listed.returncode == 0, listed.stderr
    rows = [line.split()[:2] for line in listed.stdout.splitlines()[1:]]
    return {f"{ns}/{name}" for ns, name in rows}


def test_the_notes_find_the_pods_to_delete_before_an_uninstall(installed: rig.Rig) -> None:
    """The command the chart's notes print (and install.md gives) lists the Pods that mount an
    artifact, and only them, on a real cluster."""
    mounting = _mounting_pods(installed)
    assert {f"{TENANT}/reader-1", f"{TENANT}/reader-2"} <= mounting, mounting
    assert not any(pod.split("/")[1].startswith(RELEASE) for pod in mounting), mounting


def test_deleting_pods_unpublishes(installed: rig.Rig) -> None:
    uids = [_json(installed, "get", "pod", name, "-n", TENANT)["metadata"]["uid"]
            for name in ("reader-1", "reader-2")]  # fmt: skip
    assert all(_mounted(uid) for uid in uids)
    installed.kubectl("delete", "pods", "-n", TENANT, "-l", "e2e=reader", "--timeout=120s",
                      timeout=150)  # fmt: skip
    installed.wait("the readers' volumes unmounted", lambda: not any(map(_mounted, uids)),
                   timeout=60, namespace=TENANT)  # fmt: skip


def _mounted(uid: str) -> bool:
    return any(f"/pods/{uid}/volumes/kubernetes.io~csi/" in point
               for point in rig.mounts_under(rig.KUBELET_DIR))  # fmt: skip


def test_csi_sanity(installed: rig.Rig) -> None:
    """csi-sanity's identity and node suites against the DaemonSet's plugin, over the socket
    kubelet uses. Its targets live under the kubelet directory (the plugin refuses any other);
    the cases that need a controller to create a volume first are left out (a node-only,
    ephemeral-only driver has none)."""
    sanity = rig.KUBE_BIN / "csi-sanity"
    base = rig.KUBELET_DIR / "csi-sanity"
    base.mkdir(exist_ok=True)
    socket = rig.KUBELET_DIR / "plugins" / DRIVER / "csi.sock"
    argv = [str(sanity), f"--csi.endpoint=unix://{socket}", f"--csi.mountdir={base}/target",
            f"--csi.stagingdir={base}/staging", "--ginkgo.focus=Node Service|Identity Service",
            "--ginkgo.skip=" + SANITY_SKIP, "--ginkgo.no-color"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


# each of these creates its volume through a Controller service first (CreateVolume): a
# node-only, ephemeral-only driver has none, so they would test csi-sanity's assumption
SANITY_SKIP = ("should work|should remove target path|"
               "should fail when volume does not exist on the specified path")  # fmt: skip


HELM_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: tenant-models\nversion: 0.1.0\n",
    "values.yaml": "team: a\ntier: ''\n",
    "templates/artifact.yaml": textwrap.dedent(f"""\
        apiVersion: worker.gpustack.ai/v1
        kind: ModelArtifact
        metadata:
          name: helm-tiny
          labels:
            team: {{{{ .Values.team | quote }}}}
            {{{{- if .Values.tier }}}}
            tier: {{{{ .Values.tier | quote }}}}
            {{{{- end }}}}
        spec:
          source:
            huggingFace:
              repository: {REPOSITORY}
        """),
}


def test_helm4_applies_a_chart_of_model_artifacts(installed: rig.Rig) -> None:
    """Helm 4 applies server-side by default: install and upgrade a chart holding a
    ModelArtifact through the aggregator (its releases in kube-apiserver's Secrets)."""
    chart = installed.work / "tenant-models"
    for name, text in HELM_CHART.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    common = ("--namespace", TENANT, "--kubeconfig", str(installed.kubeconfig),
              "--kube-context", "admin")

    def artifact() -> dict[str, Any]:
        got: dict[str, Any] = _json(installed, "get", "modelartifacts.worker.gpustack.ai",
                                    "helm-tiny", "-n", TENANT, "--show-managed-fields")
        return got

    def managers(obj: dict[str, Any]) -> list[tuple[str, str]]:
        return [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]]

    done = helm.run("install", "tenant-models", str(chart), "--set", "tier=gold", *common)
    assert done.returncode == 0, f"helm install:\n{done.stdout}\n{done.stderr}"
    first = artifact()
    assert first["metadata"]["labels"]["team"] == "a"
    assert first["metadata"]["labels"]["tier"] == "gold"
    assert ("helm", "Apply") in managers(first), first["metadata"]["managedFields"]
    done = helm.run("upgrade", "tenant-models", str(chart), "--set", "team=b", *common)
    assert done.returncode == 0, f"helm upgrade:\n{done.stdout}\n{done.stderr}"
    second = artifact()
    assert second["metadata"]["labels"]["team"] == "b"
    # the upgrade no longer applies tier: Helm gave it up and nobody else owns it
    assert "tier" not in second["metadata"]["labels"]
    done = helm.run("uninstall", "tenant-models", "--wait", *common)
    assert done.returncode == 0, done.stderr
    left = installed.kubectl("get", "modelartifacts.worker.gpustack.ai", "-n", TENANT,
                             "-o", "name").stdout
    assert "helm-tiny" not in left


# --- the pool layer on the real node (issue 39) ------------------------------------------------

POOLS = "pools-a"
MiB = 1 << 20
SMALL = "small"
SMALL_QUOTA = 3 * MiB


def _pool_files(repo: str, shards: int, size: int) -> dict[str, bytes | int]:
    """A repository's own config.json and ``shards`` weight files of about ``size`` bytes, each
    size its own (the node stores a file once, whichever trees list it)."""
    files: dict[str, bytes | int] = {"config.json": b'{"model_type": "e2e", "name": "%s"}\n'
                                     % repo.encode()}  # fmt: skip
    for i in range(shards):
        files[f"model-{i + 1:05d}-of-{shards:05d}.safetensors"] = size + 4096 * i + len(repo)
    return files


def _size(files: dict[str, bytes | int]) -> int:
    return sum(len(c) if isinstance(c, bytes) else c for c in files.values())


def _pools_namespace(cluster: rig.Rig) -> None:
    """``POOLS`` with ``grant``'s store and binding; the node's store merged from that store."""
    objects.wait_store_ready(cluster)  # the aggregated API serves the pool layer by then
    cluster.kubectl("create", "namespace", POOLS, check=False)  # an earlier step's is kept
    objects.grant(cluster, POOLS)

    def merged() -> bool:
        spec = _json(cluster, "get", "nodemodelstores", cluster.node_name).get("spec", {})
        return bool(spec.get("store") == objects.STORE)

    cluster.wait("the node's store merged from all-nodes", merged, timeout=120,
                 namespace=NAMESPACE)  # fmt: skip


def _available(cluster: rig.Rig, name: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        got = _json(cluster, "get", "modelprefetches", name, "-n", POOLS)
        return got if _condition(got, "Available") == "True" else None

    got = cluster.wait(f"ModelPrefetch {POOLS}/{name} Available", ready, timeout=240,
                       namespace=POOLS)  # fmt: skip
    assert isinstance(got, dict)
    return got


def _binding(cluster: rig.Rig, name: str) -> dict[str, Any]:
    got: dict[str, Any] = _json(cluster, "get", "modelstorebindings", name, "-n", POOLS)
    return got


def test_a_prefetch_through_its_binding_is_counted_and_held_to_the_budget(
        installed: rig.Rig, hub: fixturehub.Hub) -> None:
    """A binding of 3 MiB (docs/api.md, "ModelStoreBinding usage"): a prefetch of a 2 MiB
    artifact under it warms the node and the binding's ``usedBytes`` counts exactly its bytes; a
    second one, resolved, would project past the budget and is refused at admission naming the
    rule; a third, whose artifact does not exist yet, contributes nothing and is admitted, and
    once that artifact resolves and warms, ``usedBytes`` counts both and ``OverQuota`` turns
    True."""
    _pools_namespace(installed)
    node = installed.node_name
    repos = {name: (f"e2e/budget-{name}", _pool_files(f"e2e/budget-{name}", 1, 2 * MiB))
             for name in ("first", "second", "late")}  # fmt: skip
    for repo, files in repos.values():
        hub.add_repo(repo, files)
    installed.apply(textwrap.dedent(f"""\
        apiVersion: worker.gpustack.ai/v1
        kind: ModelStoreBinding
        metadata: {{name: {SMALL}, namespace: {POOLS}}}
        spec:
          storeRefs: [{{name: {objects.STORE}}}]
          quota: {{bytes: {SMALL_QUOTA}}}
        """))  # fmt: skip
    first = _size(repos["first"][1])
    objects.artifact(installed, POOLS, "first", repos["first"][0])
    objects.artifact(installed, POOLS, "second", repos["second"][0])
    try:
        installed.apply(objects.prefetch_manifest(POOLS, "first", "first", node, binding=SMALL))
        got = _available(installed, "first")
        assert got["status"]["readyNodes"] == 1 and "nodes" not in got["status"], got["status"]
        assert hub.bytes_served(repos["first"][0]) == first

        def counted() -> dict[str, Any] | None:
            found = _binding(installed, SMALL)
            return found if found.get("status", {}).get("usedBytes") == first else None

        binding = installed.wait(f"{SMALL}'s usedBytes {first}", counted, timeout=120,
                                 namespace=POOLS)  # fmt: skip
        assert isinstance(binding, dict)
        assert _condition(binding, reasons.OVER_QUOTA) == "False", binding["status"]
        # resolved: 2 MiB more would project 4 MiB past 3 MiB; refused, nothing stored
        refused = installed.kubectl(
            "apply", "-f", "-", check=False,
            stdin=objects.prefetch_manifest(POOLS, "second", "second", node, binding=SMALL))
        assert refused.returncode != 0, refused.stdout
        assert "spec.bindingRef" in refused.stderr and "Forbidden" in refused.stderr, refused
        assert f"past its budget of {SMALL_QUOTA} bytes" in refused.stderr, refused.stderr
        left = installed.kubectl("get", "modelprefetches", "-n", POOLS, "-o", "name").stdout
        assert "second" not in left
        assert hub.bytes_served(repos["second"][0]) == 0
        # no artifact yet: it projects nothing and is admitted; resolved and warmed, the
        # binding counts both and is over its quota
        installed.apply(objects.prefetch_manifest(POOLS, "late", "late", node, binding=SMALL))
        objects.artifact(installed, POOLS, "late", repos["late"][0])
        _available(installed, "late")
        both = first + _size(repos["late"][1])

        def over() -> dict[str, Any] | None:
            found = _binding(installed, SMALL)
            used = found.get("status", {}).get("usedBytes")
            return found if used == both and _condition(
                found, reasons.OVER_QUOTA) == "True" else None

        binding = installed.wait(f"{SMALL} OverQuota at {both} bytes", over, timeout=120,
                                 namespace=POOLS)  # fmt: skip
        assert isinstance(binding, dict)
        reason = next(c["reason"] for c in binding["status"]["conditions"]
                      if c["type"] == reasons.OVER_QUOTA)  # fmt: skip
        assert reason == reasons.QUOTA_EXCEEDED, binding["status"]
    finally:
        installed.kubectl("delete", "modelprefetches", "first", "late", "-n", POOLS,
                          "--wait=false", "--ignore-not-found", check=False)  # fmt: skip


def _download_settings(cluster: rig.Rig) -> dict[str, Any] | None:
    """The node's ``spec.download`` once its plugin applied that spec (observedGeneration)."""
    got = _json(cluster, "get", "nodemodelstores", cluster.node_name)
    applied = got.get("status", {}).get("observedGeneration") == got["metadata"]["generation"]
    download: dict[str, Any] = got["spec"]["download"]
    return download if applied else None


def test_the_pools_download_limits_bound_what_the_hub_sees(
        installed: rig.Rig, hub: fixturehub.Hub) -> None:
    """``download.concurrency: 1`` and ``download.bytesPerSecond: 4 MiB`` on the pool: a
    three-shard model of 48 MiB reaches the node with never more than one download open at the
    hub at once, and the hub's own send rate over the second half of the model (the client's
    socket buffers filled in the first) is within the cap (1.5x for the token bucket's quarter
    second and the last buffers; unlimited, the node takes it many times faster). The pool's
    field removed, the node is back on the cluster setting, and a model of three 2 MiB shards
    has several open at once: each shard is held at the hub mid-file until the hub sees two
    open (it could not end otherwise)."""
    _pools_namespace(installed)
    node = installed.node_name
    limited, control = "e2e/one-at-a-time", "e2e/all-at-once"
    rate = 4 * MiB
    files = {limited: _pool_files(limited, 3, 16 * MiB), control: _pool_files(control, 3, 2 * MiB)}
    for repo in (limited, control):
        hub.add_repo(repo, files[repo])
    objects.artifact(installed, POOLS, "limited", limited)
    objects.artifact(installed, POOLS, "control", control)
    held = threading.Event()
    try:
        limits = {"concurrency": 1, "bytesPerSecond": rate}
        installed.kubectl("patch", "modelstore", objects.STORE, "--type", "merge", "-p",
                          json.dumps({"spec": {"download": limits}}))
        installed.wait("the node's plugin on the pool's limits",
                       lambda: limits.items() <= (_download_settings(installed) or {}).items(),
                       timeout=120, namespace=NAMESPACE)  # fmt: skip
        hub.reset_counters()
        installed.apply(objects.prefetch_manifest(POOLS, "limited", "limited", node))
        _available(installed, "limited")
        assert hub.bytes_served(limited) == _size(files[limited])
        assert hub.max_open_downloads == 1
        assert hub.rate_after(limited, 0.5) <= 1.5 * rate, hub.rate_after(limited, 0.5)
        # the cluster setting again: the same shape, every shard held until two are open
        installed.kubectl("patch", "modelstore", objects.STORE, "--type", "merge", "-p",
                          '{"spec": {"download": null}}')
        cluster_setting = installed.wait(
            "the node's plugin back on the cluster's concurrency",
            lambda: (found := _download_settings(installed)) and found["concurrency"] != 1
            and not found.get("bytesPerSecond") and found["concurrency"],
            timeout=120, namespace=NAMESPACE)  # fmt: skip
        assert isinstance(cluster_setting, int) and cluster_setting >= 2
        for path, content in files[control].items():
            if isinstance(content, int):
                faults = hub.faults(control, path)
                faults.stall_at, faults.stall_until = MiB, held
        hub.reset_counters()
        installed.apply(objects.prefetch_manifest(POOLS, "control", "control", node))
        installed.wait("two downloads open at the hub at once",
                       lambda: hub.open_downloads >= 2, timeout=180, namespace=POOLS,
                       interval=0.1)  # fmt: skip
        held.set()
        _available(installed, "control")
        assert hub.max_open_downloads >= 2
        assert hub.bytes_served(control) == _size(files[control])
    finally:
        held.set()
        hub.clear_faults()
        installed.kubectl("patch", "modelstore", objects.STORE, "--type", "merge", "-p",
                          '{"spec": {"download": null}}', check=False)  # fmt: skip
        installed.kubectl("delete", "modelprefetches", "limited", "control", "-n", POOLS,
                          "--wait=false", "--ignore-not-found", check=False)  # fmt: skip


def _chart_csidriver(cluster: rig.Rig) -> str:
    """The release's CSIDriver as the chart rendered it (``helm get manifest``)."""
    done = helm.run("get", "manifest", RELEASE, "--namespace", NAMESPACE,
                    "--kubeconfig", str(cluster.kubeconfig))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (driver,) = [doc for doc in yaml.safe_load_all(done.stdout)
                 if doc and doc.get("kind") == "CSIDriver"]
    return yaml.safe_dump(driver)


def _store_names(cluster: rig.Rig) -> list[str]:
    return sorted(o["metadata"]["name"] for o in _json(cluster, "get", "nodemodelstores")["items"])


def test_the_stores_leave_with_the_csidriver_and_come_back_with_it(installed: rig.Rig) -> None:
    """Deleting the CSIDriver object (the plugin left the cluster) deletes every NodeModelStore
    though kubelet's CSINode still lists the driver; the chart's CSIDriver created again brings
    them back, Ready. Restored before the test ends: the steps after it need the stores."""
    objects.wait_store_ready(installed)
    driver = _chart_csidriver(installed)
    before = _store_names(installed)
    assert before == [installed.node_name], before
    installed.kubectl("delete", "csidriver", DRIVER)
    try:
        installed.wait("every NodeModelStore gone", lambda: _store_names(installed) == [],
                       timeout=120, namespace=NAMESPACE)  # fmt: skip
        csinode = _json(installed, "get", "csinode", installed.node_name)
        assert DRIVER in [d["name"] for d in csinode["spec"]["drivers"]]  # no driver flap
    finally:
        if installed.kubectl("get", "csidriver", DRIVER, check=False).returncode != 0:
            installed.kubectl("create", "-f", "-", stdin=driver)
    installed.wait("the NodeModelStores back", lambda: _store_names(installed) == before,
                   timeout=120, namespace=NAMESPACE)  # fmt: skip
    objects.wait_store_ready(installed)


def _csi_mounts() -> list[str]:
    return [p for p in rig.mounts_under(rig.KUBELET_DIR) if "kubernetes.io~csi" in p]


def _pods_by_uid(cluster: rig.Rig) -> dict[str, str]:
    return {p["metadata"]["uid"]: f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in _json(cluster, "get", "pods", "-A")["items"]}  # fmt: skip


def test_uninstall_leaves_nothing(installed: rig.Rig) -> None:
    """As install.md says: delete the Pods that mount an artifact (the notes' command lists them;
    the warm-up Pods of prefetches deleted a moment ago may still be among them), wait for
    kubelet to unmount their volumes through the plugin, then uninstall: no object of the
    release and no mount stays."""
    for pod in sorted(_mounting_pods(installed)):
        namespace, name = pod.split("/")
        installed.kubectl("delete", "pod", "-n", namespace, name, "--ignore-not-found",
                          "--timeout=120s", timeout=150)  # fmt: skip
    assert not _mounting_pods(installed)

    try:
        installed.wait("every Pod's model volume unmounted", lambda: not _csi_mounts(), timeout=60,
                       namespace=NAMESPACE)  # fmt: skip
    except rig.RigError as failed:
        owners = _pods_by_uid(installed)
        named = [(p, owners.get(p.split("/pods/")[1].split("/")[0], "no Pod"))
                 for p in _csi_mounts()]  # fmt: skip
        raise AssertionError(f"mounts left before the uninstall: {named}") from failed
    done = helm.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait",
                    "--kubeconfig", str(installed.kubeconfig))  # fmt: skip
    assert done.returncode == 0, done.stderr
    selector = f"app.kubernetes.io/instance={RELEASE}"

    def gone() -> bool:
        left = installed.kubectl("get", "all,configmap,secret,serviceaccount,role,rolebinding",
                                 "-n", NAMESPACE, "-l", selector, "-o", "name").stdout
        cluster_wide = installed.kubectl(
            "get", "apiservice,csidriver,clusterrole,clusterrolebinding", "-l", selector,
            "-o", "name").stdout  # fmt: skip
        return not left.strip() and not cluster_wide.strip()

    installed.wait("every object of the release gone", gone, timeout=120, namespace=NAMESPACE)
    models = str(installed.work / "models")
    # the cache directory itself is the harness's shared bind mount; nothing may stay below it
    # or in kubelet's directory from the plugin
    leftover = [p for p in rig.mounts_under(rig.KUBELET_DIR, pathlib.Path(models))
                if "kubernetes.io~csi" in p or p.startswith(models + "/")]  # fmt: skip
    assert not leftover, leftover


