"""The chart names what ``openapi.install``, ``openapi.keys``, ``openapi.plugin`` and
``openapi.volume`` say an installation names: the ServiceAccounts (and their ClusterRoles), the
Lease the worker's Role grants, the settings ConfigMap and its keys, the plugin Pods' labels (that
the API server's selector finds), the plugin's port, the CSI driver, the peer audience and the
plugins' audience. The chart cannot import Python: a drift fails here naming what differs."""

from __future__ import annotations

from typing import Any

import yaml

from devkit import helm
from nodeplugin.peer import assembly, wire
from openapi import install, keys, plugin, volume

PEER_SYNC = ["modelManager.peerSync.enabled=true"]


def _arg(args: list[str], flag: str) -> str:
    found = [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]
    assert len(found) == 1, f"{flag} in {args}"
    return found[0]


def _selects(selector: str, labels: dict[str, str]) -> bool:
    pairs = [term.split("=", 1) for term in selector.split(",")]
    return all(labels.get(key) == value for key, value in pairs)


def test_the_names_of_an_installation(default_docs: list[dict[str, Any]]) -> None:
    assert helm.NAMESPACE == install.DEFAULT_NAMESPACE
    accounts = {d["metadata"]["name"] for d in helm.by_kind(default_docs, "ServiceAccount")}
    assert accounts == {install.WORKER_SERVICE_ACCOUNT, install.PLUGIN_SERVICE_ACCOUNT}
    roles = {d["metadata"]["name"] for d in helm.by_kind(default_docs, "ClusterRole")}
    assert {install.WORKER_SERVICE_ACCOUNT, install.PLUGIN_SERVICE_ACCOUNT} <= roles
    worker = helm.one(default_docs, "Role", install.WORKER_SERVICE_ACCOUNT)
    leases = [rule.get("resourceNames") for rule in worker["rules"]
              if "leases" in rule["resources"] and "update" in rule["verbs"]]
    assert leases == [[install.LEASE]]
    args = helm.container(default_docs, "Deployment", "apiserver")["args"]
    assert _arg(args, "--worker-user") == install.WORKER_USER
    assert _arg(args, "--plugin-service-account") == install.PLUGIN_SERVICE_ACCOUNT
    assert _arg(args, "--settings-configmap") == install.SETTINGS_CONFIGMAP


def test_the_settings_keys(default_docs: list[dict[str, Any]]) -> None:
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    assert tuple(values["settings"]) == install.SETTINGS_KEYS
    rendered = helm.one(default_docs, "ConfigMap", install.SETTINGS_CONFIGMAP)["data"]
    assert set(rendered) == set(install.SETTINGS_KEYS)
    assert all(key.startswith((install.STORE_PREFIX, install.ARTIFACT_PREFIX))
               for key in install.SETTINGS_KEYS)


def test_the_plugin_pods_labels_port_and_driver(default_docs: list[dict[str, Any]]) -> None:
    daemonset = helm.one(default_docs, "DaemonSet")
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert keys.PLUGIN_LABELS.items() <= labels.items()
    assert _selects(keys.PLUGIN_SELECTOR, labels)
    args = helm.container(default_docs, "Deployment", "apiserver")["args"]
    assert _selects(_arg(args, "--plugin-pod-selector"), labels)
    assert int(_arg(args, "--plugin-secure-port")) == plugin.DEFAULT_PORT
    container = helm.container(default_docs, "DaemonSet", "plugin")
    assert int(_arg(container["args"], "--secure-port")) == plugin.DEFAULT_PORT
    assert {p["containerPort"] for p in container["ports"]} == {plugin.DEFAULT_PORT}
    assert helm.one(default_docs, "CSIDriver")["metadata"]["name"] == volume.DRIVER


def test_the_peer_audience_and_token_file_derive_from_the_driver() -> None:
    assert f"{volume.DRIVER}/peer" == wire.AUDIENCE
    assert f"/var/run/secrets/{volume.DRIVER}/peer/token" == assembly.TOKEN_FILE
    docs = helm.template(sets=PEER_SYNC).docs()
    projected = [source["serviceAccountToken"]
                 for item in helm.pod_spec(docs, "DaemonSet")["volumes"]
                 if item["name"] == "peer-token" for source in item["projected"]["sources"]]
    assert [token["audience"] for token in projected] == [wire.AUDIENCE]


def test_the_api_server_gets_a_short_lived_token_for_the_plugins_audience_only(
        default_docs: list[dict[str, Any]]) -> None:
    """What the worker sends to the plugins: a projected token for ``plugin.AUDIENCE`` (never
    kube-apiserver's), where ``--plugin-token-file`` reads it, rotated by kubelet."""
    assert f"{volume.DRIVER}/plugin" == plugin.AUDIENCE
    assert f"/var/run/secrets/{volume.DRIVER}/plugin/token" == plugin.TOKEN_FILE
    pod = helm.pod_spec(default_docs, "Deployment")
    container = helm.container(default_docs, "Deployment", "apiserver")
    assert _arg(container["args"], "--plugin-token-file") == plugin.TOKEN_FILE
    volumes = {v["name"]: v for v in pod["volumes"]}
    (source,) = volumes["plugin-token"]["projected"]["sources"]
    token = source["serviceAccountToken"]
    assert token["audience"] == plugin.AUDIENCE
    assert 600 <= token["expirationSeconds"] <= 3600  # kube's floor; short, kubelet renews
    mount = next(m for m in container["volumeMounts"] if m["name"] == "plugin-token")
    assert f"{mount['mountPath']}/{token['path']}" == plugin.TOKEN_FILE
    assert mount["readOnly"] is True
    # the only projected token with an audience of its own in the API server's Pod
    audiences = [s["serviceAccountToken"].get("audience") for v in pod["volumes"]
                 for s in (v.get("projected") or {}).get("sources", [])
                 if "serviceAccountToken" in s]
    assert audiences == [plugin.AUDIENCE]


def test_the_selector_check_sees_a_drift(default_docs: list[dict[str, Any]]) -> None:
    labels = dict(helm.one(default_docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"])
    labels[keys.COMPONENT] = "something-else"
    assert not _selects(keys.PLUGIN_SELECTOR, labels)
