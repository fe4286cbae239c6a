"""Node-to-node sync in the chart: off by default (no flag, port, env, token or NetworkPolicy);
on, the plugin gets the peer flags its real parser accepts, the projected token for the peer
audience where the flag says, its Pod IP to publish, the container port, and a NetworkPolicy
admitting the peer port from the plugin Pods only while its other ports stay reachable."""

from __future__ import annotations

from typing import Any

import pytest

from devkit import helm
from nodeplugin import __main__ as plugin_cli
from nodeplugin.peer import assembly, wire

ON = ["modelManager.peerSync.enabled=true"]
PLUGIN_USER = "system:serviceaccount:gpustack-system:model-manager-node"


@pytest.fixture(scope="module")
def on_docs() -> list[dict[str, Any]]:
    return helm.template(sets=ON).docs()


def _plugin(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return helm.container(docs, "DaemonSet", "plugin")


def test_off_by_default_renders_nothing_of_it(default_docs: list[dict[str, Any]]) -> None:
    plugin = _plugin(default_docs)
    assert not [a for a in plugin["args"] if a.startswith("--peer")]
    assert [p["name"] for p in plugin["ports"]] == ["https"]
    assert "POD_IP" not in {e["name"] for e in plugin["env"]}
    pod = helm.pod_spec(default_docs, "DaemonSet")
    assert "peer-token" not in {v["name"] for v in pod["volumes"]}
    assert not helm.by_kind(default_docs, "NetworkPolicy")


def test_on_the_args_parse_to_the_plugin_s_peer_settings(
    on_docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("POD_IP", "PEER_PORT", "PEER_USER", "NODE_NAME"):
        monkeypatch.delenv(variable, raising=False)  # only what the chart passes counts
    plugin = _plugin(on_docs)
    args = helm.expanded_args(plugin, fields={"status.podIP": "10.244.3.9"})
    spelled = set(plugin_cli.parser()._option_string_actions)
    assert [a.partition("=")[0] for a in args if a.partition("=")[0] not in spelled] == []
    parsed = plugin_cli.parser().parse_args(args)
    assert plugin_cli.problem(parsed) is None
    peer = plugin_cli.config_from(parsed).peer
    assert peer.enabled and peer.port == 32445
    assert peer.url == "https://10.244.3.9:32445"  # what it publishes in status.peer.url
    assert peer.plugin_user == PLUGIN_USER
    # the ServiceAccount the DaemonSet runs as is the one the port admits
    pod = helm.pod_spec(on_docs, "DaemonSet")
    assert peer.plugin_user.rsplit(":", 1)[1] == pod["serviceAccountName"]
    assert peer.max_streams == 8
    assert peer.max_streams_per_peer is None  # half of max_streams (slots.Slots)
    assert peer.send_timeout == 30.0
    assert peer.token_file == assembly.TOKEN_FILE
    assert peer.addresses == {}  # discovery, not a static map
    assert {"name": "peer", "containerPort": 32445, "protocol": "TCP"} in plugin["ports"]
    assert plugin_cli.config_from(parsed).download.follow_fetching  # the plugin's default


def test_following_a_file_still_arriving_can_be_turned_off() -> None:
    docs = helm.template(sets=[*ON, "modelManager.peerSync.followFetching=false"]).docs()
    args = _plugin(docs)["args"]
    assert "--peer-follow-fetching=false" in args
    parsed = plugin_cli.parser().parse_args(
        helm.expanded_args(_plugin(docs), fields={"status.podIP": "10.244.3.9"}))
    assert not plugin_cli.config_from(parsed).download.follow_fetching


def test_on_the_peer_token_is_projected_for_the_peer_audience_only(
    on_docs: list[dict[str, Any]],
) -> None:
    pod = helm.pod_spec(on_docs, "DaemonSet")
    volumes = {v["name"]: v for v in pod["volumes"]}
    (source,) = volumes["peer-token"]["projected"]["sources"]
    token = source["serviceAccountToken"]
    assert token["audience"] == wire.AUDIENCE
    assert 600 <= token["expirationSeconds"] <= 86400
    mount = next(m for m in _plugin(on_docs)["volumeMounts"] if m["name"] == "peer-token")
    assert f"{mount['mountPath']}/{token['path']}" == assembly.TOKEN_FILE
    assert mount["readOnly"] is True
    # the API server's token stays in its own volume, without an audience of its own
    api_token = volumes["token"]["projected"]["sources"][0]["serviceAccountToken"]
    assert "audience" not in api_token


def _rules(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    policy = helm.one(docs, "NetworkPolicy")
    daemonset = helm.one(docs, "DaemonSet")
    assert policy["spec"]["podSelector"]["matchLabels"] == \
        daemonset["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rules: dict[str, dict[str, Any]] = {}
    for rule in policy["spec"]["ingress"]:
        (port,) = rule["ports"]
        rules[port["port"]] = rule
    return rules


def test_on_the_network_policy_admits_peers_only_and_keeps_the_other_ports(
    on_docs: list[dict[str, Any]],
) -> None:
    rules = _rules(on_docs)
    pod = helm.pod_spec(on_docs, "DaemonSet")
    named = {p["name"] for c in pod["containers"] for p in c.get("ports") or []}
    assert set(rules) == named == {"peer", "https", "registrar"}
    selector = helm.one(on_docs, "DaemonSet")["spec"]["selector"]["matchLabels"]
    assert rules["peer"]["from"] == [{"podSelector": {"matchLabels": selector}}]
    assert "from" not in rules["https"]  # every source, as without the policy
    assert "from" not in rules["registrar"]


def test_the_secure_port_s_sources_are_configurable() -> None:
    source = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}}
    docs = helm.template(sets=[
        *ON, "modelManager.peerSync.networkPolicy.securePortFrom[0].namespaceSelector."
             "matchLabels.kubernetes\\.io/metadata\\.name=obs"]).docs()
    assert _rules(docs)["https"]["from"] == [source]


def test_the_policy_can_be_left_out_and_the_port_moved() -> None:
    docs = helm.template(sets=[*ON, "modelManager.peerSync.networkPolicy.enabled=false",
                               "modelManager.port=40000"]).docs()
    assert not helm.by_kind(docs, "NetworkPolicy")
    assert "--peer-port=40000" in _plugin(docs)["args"]
    # the policy alone does nothing with peer sync off
    off = helm.template(sets=["modelManager.peerSync.networkPolicy.enabled=true"]).docs()
    assert not helm.by_kind(off, "NetworkPolicy")


def test_the_plugin_role_can_review_peer_tokens_and_list_the_stores(
    on_docs: list[dict[str, Any]],
) -> None:
    role = helm.one(on_docs, "ClusterRole", "model-manager-node")
    grants = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
              for r in rule["resources"] for v in rule["verbs"]}
    assert ("authentication.k8s.io", "tokenreviews", "create") in grants
    assert ("worker.gpustack.ai", "nodemodelstores", "list") in grants
