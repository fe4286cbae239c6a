"""The chart rendered with its defaults: every object, RBAC rule, probe and security setting."""

from __future__ import annotations

import base64
from typing import Any

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from devkit import helm

NS = helm.NAMESPACE


def _rules(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples a role grants."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "DaemonSet")]
    return [c for pod in pods for c in pod["containers"]]


def test_kinds(default_docs: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in default_docs)
    assert kinds == sorted([
        ("APIService", "v1.worker.gpustack.ai"),
        ("CSIDriver", "model.csi.gpustack.ai"),
        ("ClusterRole", "model-manager-anchor-granter"),
        ("ClusterRole", "model-manager-gpustack-server"),
        ("ClusterRole", "model-manager-node"),
        ("ClusterRole", "model-manager-tenant-editor"),
        ("ClusterRole", "model-manager-tenant-reader"),
        ("ClusterRole", "model-manager-worker"),
        ("ClusterRoleBinding", "model-manager-node"),
        ("ClusterRoleBinding", "model-manager-worker"),
        ("ClusterRoleBinding", "model-manager:auth-delegator"),
        ("ConfigMap", "model-manager-settings"),
        ("DaemonSet", "model-manager-node"),
        ("Deployment", "model-manager"),
        ("MutatingWebhookConfiguration", "model-manager-pods"),
        ("PersistentVolumeClaim", "model-manager-data"),
        ("Role", "model-manager-node"),
        ("Role", "model-manager-worker"),
        ("RoleBinding", "model-manager-node"),
        ("RoleBinding", "model-manager-worker"),
        ("RoleBinding", "model-manager:auth-reader"),
        ("Secret", "model-manager-tls"),
        ("Service", "model-manager"),
        ("ServiceAccount", "model-manager-node"),
        ("ServiceAccount", "model-manager-worker"),
    ])  # fmt: skip
    assert not helm.by_kind(default_docs, "PodDisruptionBudget")  # one replica
    # nothing listens but the HTTPS port and the registrar's health port (peer sync is not in
    # this release), so there is no NetworkPolicy to write
    assert not helm.by_kind(default_docs, "NetworkPolicy")


def test_every_container_has_resources_probes_and_a_security_context(
    default_docs: list[dict[str, Any]],
) -> None:
    containers = _containers(default_docs)
    assert {c["name"] for c in containers} == {"apiserver", "plugin", "node-driver-registrar"}
    for container in containers:
        assert container["resources"]["requests"] and container["resources"]["limits"]
        assert "livenessProbe" in container and "readinessProbe" in container, container["name"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_apiserver_deployment(default_docs: list[dict[str, Any]]) -> None:
    deployment = helm.one(default_docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"  # one SQLite writer at a time
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "model-manager-worker"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz"),
                        ("startupProbe", "/livez")):  # fmt: skip
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert container["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["data"]["mountPath"] == "/var/lib/model-manager"
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "model-manager-data"
    assert volumes["tls"]["secret"]["secretName"] == "model-manager-tls"
    assert mounts["tls"]["readOnly"] is True
    args = container["args"]
    assert all(isinstance(arg, str) for arg in args)
    assert "--data-dir=/var/lib/model-manager" in args
    assert "--tls-cert-file=/etc/model-manager/tls/tls.crt" in args
    assert "--storage=sqlite" in args and "--controllers=embedded" in args
    assert "--worker-user=system:serviceaccount:gpustack-system:model-manager-worker" in args
    assert "--plugin-service-account=model-manager-node" in args
    assert "--plugin-namespace=gpustack-system" in args
    assert "--plugin-secure-port=32444" in args
    # the live-progress informer finds exactly the DaemonSet's Pods
    selector = next(a for a in args if a.startswith("--plugin-pod-selector="))
    wanted = dict(pair.split("=") for pair in selector.split("=", 1)[1].split(","))
    daemonset = helm.one(default_docs, "DaemonSet")["spec"]["template"]
    assert wanted.items() <= daemonset["metadata"]["labels"].items()
    assert wanted == helm.one(default_docs, "DaemonSet")["spec"]["selector"]["matchLabels"]
    assert "--settings-configmap=model-manager-settings" in args
    assert "--prefetch-warmup-image=gpustack/mirrored-python:3.12-alpine" in args
    assert "--prefetch-warmup-retry-interval=5m" in args
    assert not [arg for arg in args if arg.startswith("--etcd")]
    claim = helm.one(default_docs, "PersistentVolumeClaim")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_service_and_apiservice_trust_the_generated_certificate(
    default_docs: list[dict[str, Any]],
) -> None:
    service = helm.one(default_docs, "Service")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    api = helm.one(default_docs, "APIService")
    spec = api["spec"]
    assert (spec["group"], spec["version"]) == ("worker.gpustack.ai", "v1")
    assert spec["service"] == {"name": "model-manager", "namespace": NS, "port": 443}
    assert "insecureSkipTLSVerify" not in spec
    secret = helm.one(default_docs, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    ca = x509.load_pem_x509_certificate(base64.b64decode(spec["caBundle"]))
    assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(spec["caBundle"])
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = set(sans.get_values_for_type(x509.DNSName))
    assert {f"model-manager.{NS}.svc", f"model-manager.{NS}.svc.cluster.local"} <= names
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku


def test_delegation_bindings(default_docs: list[dict[str, Any]]) -> None:
    worker = {"kind": "ServiceAccount", "name": "model-manager-worker", "namespace": NS}
    delegator = helm.one(default_docs, "ClusterRoleBinding", "model-manager:auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    assert delegator["subjects"] == [worker]
    reader = helm.one(default_docs, "RoleBinding", "model-manager:auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": "extension-apiserver-authentication-reader"}  # fmt: skip
    assert reader["subjects"] == [worker]


def test_worker_rules_are_exactly_what_it_needs(default_docs: list[dict[str, Any]]) -> None:
    """Each kube grant is a call the server or its controllers make (test_chart_rbac.py proves
    each one is used); the worker.gpustack.ai grants mirror standalone's built-in role."""
    cluster = _rules(helm.one(default_docs, "ClusterRole", "model-manager-worker"))
    group = "worker.gpustack.ai"
    assert cluster == {
        ("", "nodes", "get"),
        *{("", "nodes", v) for v in ("list", "watch")},
        *{("", "pods", v) for v in ("create", "delete", "list", "watch")},
        ("", "nodes/proxy", "get"),
        *{("storage.k8s.io", "csinodes", v) for v in ("list", "watch")},
        *{("storage.k8s.io", "csidrivers", v) for v in ("list", "watch")},
        *{("", "secrets", v) for v in ("get", "list", "watch")},
        *{("", "persistentvolumeclaims", v) for v in ("list", "watch")},
        ("", "events", "create"),
        *{(group, "modelartifacts", v) for v in ("get", "list", "watch")},
        *{(group, "modelartifacts/status", v) for v in ("get", "update", "patch")},
        *{(group, "nodemodelstores", v)
          for v in ("get", "list", "watch", "create", "update", "patch", "delete")},
        *{(group, "modelprefetches", v) for v in ("get", "list", "watch")},
        *{(group, "modelprefetches/status", v) for v in ("get", "update", "patch")},
        *{(group, r, v) for r in ("modelstores", "modelstorebindings")
          for v in ("get", "list", "watch")},
        *{(group, r, v) for r in ("modelstores/status", "modelstorebindings/status")
          for v in ("get", "update", "patch")},
    }  # fmt: skip
    role = helm.one(default_docs, "Role", "model-manager-worker")
    assert role["metadata"]["namespace"] == NS
    assert _rules(role) == {
        *{("", "pods", v) for v in ("get", "list", "watch")},
        *{("apps", "daemonsets", v) for v in ("list", "watch")},
        *{("", "configmaps", v) for v in ("list", "watch")},
        *{("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")},
    }
    leases = [r for r in role["rules"] if r["resources"] == ["leases"]]
    # get and update name the controllers' Lease; create cannot name one
    assert sorted((r["verbs"], r.get("resourceNames")) for r in leases) == [
        (["create"], None), (["get", "update"], ["model-manager-controllers"])]
    binding = helm.one(default_docs, "ClusterRoleBinding", "model-manager-worker")
    assert binding["roleRef"]["name"] == "model-manager-worker"


def test_plugin_rules_read_no_secret(default_docs: list[dict[str, Any]]) -> None:
    cluster = _rules(helm.one(default_docs, "ClusterRole", "model-manager-node"))
    group = "worker.gpustack.ai"
    assert cluster == {
        *{(group, r, v) for r in ("modelartifacts", "nodemodelstores")
          for v in ("get", "list", "watch")},
        *{(group, "nodemodelstores/status", v) for v in ("get", "update", "patch")},
        ("authentication.k8s.io", "tokenreviews", "create"),
    }  # fmt: skip
    role = helm.one(default_docs, "Role", "model-manager-node")
    assert _rules(role) == {("", "configmaps", v) for v in ("list", "watch")}
    subjects = helm.one(default_docs, "RoleBinding", "model-manager-node")["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "model-manager-node",
                         "namespace": NS}]  # fmt: skip
    assert not {r for g, r, v in cluster | _rules(role) if r == "secrets"}


def test_rbac_rules_carry_a_reason() -> None:
    for name in ("rbac-apiserver.yaml", "rbac-plugin.yaml"):
        lines = (helm.CHART / "templates" / name).read_text().splitlines()
        for index, line in enumerate(lines):
            if line.strip().startswith("- apiGroups:"):
                assert lines[index - 1].strip().startswith("#"), f"{name}:{index + 1} uncommented"


def test_csidriver(default_docs: list[dict[str, Any]]) -> None:
    spec = helm.one(default_docs, "CSIDriver")["spec"]
    assert spec["attachRequired"] is False
    assert spec["podInfoOnMount"] is True
    assert spec["volumeLifecycleModes"] == ["Ephemeral"]
    assert spec["fsGroupPolicy"] == "None"


def test_node_plugin_daemonset(default_docs: list[dict[str, Any]]) -> None:
    pod = helm.one(default_docs, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "model-manager-node"
    assert pod["automountServiceAccountToken"] is False
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["tolerations"] == [{"operator": "Exists"}]
    containers = {c["name"]: c for c in pod["containers"]}
    plugin, registrar = containers["plugin"], containers["node-driver-registrar"]
    assert plugin["securityContext"]["privileged"] is True
    assert registrar["image"] == "docker.io/gpustack/mirrored-csi-node-driver-registrar:v2.17.0"
    assert registrar["args"] == [
        "--csi-address=/csi/csi.sock",
        "--kubelet-registration-path=/var/lib/kubelet/plugins/model.csi.gpustack.ai/csi.sock",
        "--http-endpoint=:9809",
        "--v=2",
    ]
    mounts = {m["name"]: m for m in plugin["volumeMounts"]}
    assert mounts["pods-dir"]["mountPath"] == "/var/lib/kubelet/pods"
    assert mounts["pods-dir"]["mountPropagation"] == "Bidirectional"
    assert mounts["cache"]["mountPath"] == "/var/lib/gpustack/models"
    assert mounts["token"]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["cache"]["hostPath"] == {"path": "/var/lib/gpustack/models",
                                            "type": "DirectoryOrCreate"}  # fmt: skip
    assert volumes["pods-dir"]["hostPath"]["path"] == "/var/lib/kubelet/pods"
    assert volumes["registration-dir"]["hostPath"]["path"] == "/var/lib/kubelet/plugins_registry"
    sources = volumes["token"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert {"key": "ca.crt", "path": "ca.crt"} in sources[1]["configMap"]["items"]
    assert plugin["ports"] == [{"name": "https", "containerPort": 32444, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        assert plugin[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    args = plugin["args"]
    assert "--secure-port=32444" in args and "--kubelet-dir=/var/lib/kubelet" in args
    assert "--root=/var/lib/gpustack/models" in args
    assert not [arg for arg in args if arg.startswith("--peer")]
    assert "peer-token" not in volumes


def test_settings_configmap_seeds(default_docs: list[dict[str, Any]]) -> None:
    data = helm.one(default_docs, "ConfigMap")["data"]
    assert data == {
        "model-artifact-huggingface-endpoint": "https://huggingface.co",
        "model-artifact-modelscope-endpoint": "https://www.modelscope.cn",
        "model-artifact-https-proxy": "",
        "model-artifact-no-proxy": "",
        "model-artifact-ca-bundle": "",
        "model-artifact-revalidate-interval": "24h",
        "model-store-high-watermark": "80",
        "model-store-low-watermark": "70",
        "model-store-download-concurrency": "8",
        "model-store-download-bandwidth": "0",
        "model-store-peer-sync": "false",
    }
