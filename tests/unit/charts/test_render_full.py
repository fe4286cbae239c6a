"""The chart with ci/full-values.yaml, which sets every value: each one reaches its object."""

from __future__ import annotations

import json
from typing import Any

import yaml

from devkit import helm


def _leaves(tree: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, sub in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        if sub.get("type") == "object" and "properties" in sub and "default" not in sub:
            keys |= _leaves(tree.get(name, {}), sub, f"{key}.")
        elif name in tree:
            keys.add(key)
    return keys


def _all_leaves(schema: dict[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, sub in schema.get("properties", {}).items():
        if sub.get("deprecated"):  # an old name the schema refuses: no value to set
            continue
        if sub.get("type") == "object" and "properties" in sub and "default" not in sub:
            keys |= _all_leaves(sub, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def test_the_file_sets_every_value() -> None:
    schema = json.loads((helm.CHART / "values.schema.json").read_text())
    full = yaml.safe_load(helm.FULL_VALUES.read_text())
    defaults = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    assert _leaves(full, schema) == _all_leaves(schema)

    def differs(key: str) -> bool:
        a, b = full, defaults
        for part in key.split("."):
            a, b = a[part], b[part]
        return bool(a != b)

    same = sorted(k for k in _all_leaves(schema) if not differs(k))
    # these keep their defaults on purpose: the other choice renders a smaller chart (tested in
    # test_render_variants.py)
    assert same == [
        "apiserver.apiService.insecureSkipTLSVerify",
        "apiserver.controllers.leaderElect",
        "apiserver.controllers.mode",
        "apiserver.podWebhook.enabled",
        "apiserver.service.type",
        "modelManager.enabled",
        "modelManager.peerSync.networkPolicy.enabled",
    ]


def test_replicas_on_etcd_with_a_disruption_budget(full_docs: list[dict[str, Any]]) -> None:
    deployment = helm.one(full_docs, "Deployment")
    assert deployment["metadata"]["name"] == "model-manager"
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    pdb = helm.one(full_docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 2
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    assert not helm.by_kind(full_docs, "PersistentVolumeClaim")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert "--bind=::" in args  # a string, not a YAML mapping
    assert "--storage=etcd" in args
    assert "--etcd-servers=https://etcd-0.etcd:2379,https://etcd-1.etcd:2379" in args
    assert "--etcd-prefix=/gpustack-test" in args
    assert "--etcd-cafile=/etc/model-manager/etcd/ca.crt" in args
    assert "--processes=2" in args and "--leader-elect" in args
    assert "--prefetch-warmup-image=registry.example.test/tools/busybox:1.36" in args
    assert "--prefetch-warmup-retry-interval=90s" in args
    assert "--api-audiences=https://kubernetes.default.svc,model-manager" in args
    assert "--requestheader-allowed-names=front-proxy-client" in args
    assert "--authorization-always-allow-paths=/healthz,/livez,/readyz,/metrics" in args
    assert "--worker-user=system:serviceaccount:gpustack-system:mm-worker" in args
    assert args[-1] == "--shutdown-timeout=10"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["etcd-tls"]["secret"]["secretName"] == "etcd-client"
    assert volumes["data"] == {"name": "data", "emptyDir": {}}
    assert container["image"] == "registry.example.test/gpustack/model-manager:0.1.0-test"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert deployment["metadata"]["labels"]["team"] == "platform"


def test_given_secret_and_ca_bundle(full_docs: list[dict[str, Any]]) -> None:
    assert not helm.by_kind(full_docs, "Secret")  # the Secret is the operator's
    api = helm.one(full_docs, "APIService")
    values = yaml.safe_load(helm.FULL_VALUES.read_text())["apiserver"]
    assert api["spec"]["caBundle"] == values["tls"]["caBundle"]
    assert api["spec"]["service"]["port"] == 8443
    assert api["spec"]["groupPriorityMinimum"] == 2000
    assert api["metadata"]["annotations"] == {"example.test/owner": "platform"}
    pod = helm.one(full_docs, "Deployment")["spec"]["template"]["spec"]
    tls = next(v for v in pod["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == "model-manager-tls"


def test_plugin_placement_ports_and_peer_sync(full_docs: list[dict[str, Any]]) -> None:
    daemonset = helm.one(full_docs, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["priorityClassName"] == "gpu-critical"
    assert daemonset["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 2
    containers = {c["name"]: c for c in pod["containers"]}
    plugin = containers["plugin"]
    args = plugin["args"]
    for expected in ("--root=/mnt/models", "--kubelet-dir=/var/snap/kubelet",
                     "--secure-port=32555", "--scrub-interval=72h",
                     "--scrub-bytes-per-second=52428800", "--log-level=WARNING",
                     "--worker-user=system:serviceaccount:gpustack-system:mm-worker"):  # fmt: skip
        assert expected in args
    assert args[-1] == "--bind-address=::"
    # peer sync on (tests/unit/charts/test_render_peer_sync.py has the details)
    assert [arg for arg in args if arg.startswith("--peer")] == [
        "--peer-port=32556", "--peer-user=system:serviceaccount:gpustack-system:mm-plugin",
        "--peer-token-file=/var/run/secrets/model.csi.gpustack.ai/peer/token",
        "--peer-advertise-address=$(POD_IP)", "--peer-max-streams=16",
        "--peer-send-timeout=45s", "--peer-max-streams-per-peer=6",
        "--peer-follow-fetching=false"]
    assert [p["containerPort"] for p in plugin["ports"]] == [32555, 32556]
    mounts = {m["name"]: m["mountPath"] for m in plugin["volumeMounts"]}
    assert mounts["pods-dir"] == "/var/snap/kubelet/pods"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["peer-token"] == "/var/run/secrets/model.csi.gpustack.ai/peer"
    policy = helm.one(full_docs, "NetworkPolicy")
    https = next(r for r in policy["spec"]["ingress"] if r["ports"][0]["port"] == "https")
    assert https["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"}
    registrar = containers["node-driver-registrar"]
    assert registrar["image"] == "registry.example.test/csi-node-driver-registrar:v2.17.0"
    assert "--kubelet-registration-path=/var/snap/kubelet/plugins/model.csi.gpustack.ai/csi.sock" \
        in registrar["args"]
    assert volumes["registration-dir"]["hostPath"]["path"] == "/var/snap/kubelet/plugins_registry"
    server = helm.one(full_docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--plugin-secure-port=32555" in server["args"]
    assert "--plugin-service-account=mm-plugin" in server["args"]


def test_settings_and_service_accounts(full_docs: list[dict[str, Any]]) -> None:
    data = helm.one(full_docs, "ConfigMap", "model-manager-settings")["data"]
    assert data["model-store-download-bandwidth"] == "200Mi"
    assert data["model-store-peer-sync"] == "true"
    assert data["model-artifact-ca-bundle"] == "hub-ca"
    accounts = {d["metadata"]["name"]: d for d in helm.by_kind(full_docs, "ServiceAccount")}
    assert set(accounts) == {"mm-worker", "mm-plugin"}
    assert accounts["mm-plugin"]["metadata"]["annotations"] == {"example.test/role": "plugin"}
