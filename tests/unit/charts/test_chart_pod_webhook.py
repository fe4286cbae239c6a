"""The chart's MutatingWebhookConfiguration: the two Pod webhooks the API server serves
(``apiserver/endpoints/podwebhook.py``), their order, failure policies, timeout, selectors and
matchConditions, the CA bundle the APIService trusts, and what a cluster without
matchConditions (kube < 1.28) gets."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from apiserver.endpoints import podwebhook
from devkit import helm
from openapi import install, keys, volume

KIND = "MutatingWebhookConfiguration"


def _webhooks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = helm.one(docs, KIND)["webhooks"]
    return found


def test_two_webhooks_in_order_with_their_own_failure_policies(
        default_docs: list[dict[str, Any]]) -> None:
    fill, prefer = _webhooks(default_docs)
    assert (fill["name"], prefer["name"]) == (install.FILL_WEBHOOK, install.PREFER_WEBHOOK)
    assert fill["failurePolicy"] == "Fail"  # a Pod naming only its artifact cannot mount else
    assert prefer["failurePolicy"] == "Ignore"  # compute first
    api_service = helm.one(default_docs, "APIService")["spec"]
    for hook, path in ((fill, install.FILL_WEBHOOK_PATH), (prefer, install.PREFER_WEBHOOK_PATH)):
        service = hook["clientConfig"]["service"]
        assert service == {"name": api_service["service"]["name"],
                           "namespace": api_service["service"]["namespace"],
                           "port": api_service["service"]["port"], "path": path}
        assert hook["clientConfig"]["caBundle"] == api_service["caBundle"]
        assert hook["admissionReviewVersions"] == [podwebhook.API_VERSION.split("/")[1]]
        assert hook["sideEffects"] == "None"
        assert 1 <= hook["timeoutSeconds"] <= 10
        assert hook["rules"] == [{"operations": ["CREATE"], "apiGroups": [""],
                                  "apiVersions": ["v1"], "resources": ["pods"],
                                  "scope": "Namespaced"}]
        assert hook["reinvocationPolicy"] == "Never"


def test_only_pods_with_a_model_volume_outside_the_system_namespaces(
        default_docs: list[dict[str, Any]]) -> None:
    for hook in _webhooks(default_docs):
        assert hook["namespaceSelector"] == {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", helm.NAMESPACE]}]}
        assert hook["objectSelector"] == {"matchExpressions": [
            {"key": keys.COMPONENT, "operator": "NotIn", "values": [keys.WARMUP]}]}
        [condition] = hook["matchConditions"]
        expression = " ".join(condition["expression"].split())
        assert expression == (
            "has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.csi) && "
            f"v.csi.driver == '{volume.DRIVER}')")


def test_the_values_reach_the_webhooks(full_docs: list[dict[str, Any]]) -> None:
    for hook in _webhooks(full_docs):
        assert hook["timeoutSeconds"] == 3
        assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == [
            "kube-system", helm.NAMESPACE, "batch-system"]


def test_without_match_conditions_both_fail_open() -> None:
    """kube < 1.28 has no matchConditions: every Pod CREATE of the selected namespaces would
    reach the webhooks, so an unreachable API server must not block them."""
    docs = helm.template(kube_version="1.27.0").docs()
    for hook in _webhooks(docs):
        assert "matchConditions" not in hook
        assert hook["failurePolicy"] == "Ignore"
    newer = helm.template(kube_version="1.28.0").docs()
    assert [h["failurePolicy"] for h in _webhooks(newer)] == ["Fail", "Ignore"]
    for doc in helm.by_kind(docs, KIND) + helm.by_kind(newer, KIND):
        kubernetes_validate.validate(doc, "1.33.0", strict=True)


def test_disabled_or_without_a_ca_bundle() -> None:
    assert not helm.by_kind(helm.template(sets=["apiserver.podWebhook.enabled=false"]).docs(),
                            KIND)
    refused = helm.template(sets=["apiserver.tls.mode=secret",
                                  "apiserver.tls.secretName=mine",
                                  "apiserver.apiService.insecureSkipTLSVerify=true"],
                            check=False)
    assert refused.returncode != 0
    assert "apiserver.podWebhook.enabled needs the serving certificate's CA bundle" in (
        refused.stderr)
    injected = helm.template(sets=[
        "apiserver.tls.mode=secret", "apiserver.tls.secretName=mine",
        "apiserver.apiService.annotations.cert-manager\\.io/inject-ca-from=ns/cert"]).docs()
    config = helm.one(injected, KIND)
    assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "ns/cert"}
    assert all("caBundle" not in hook["clientConfig"] for hook in config["webhooks"])


@pytest.mark.parametrize("bad", ["0", "31"])
def test_the_timeout_is_bounded_by_the_schema(bad: str) -> None:
    result = helm.template(sets=[f"apiserver.podWebhook.timeoutSeconds={bad}"], check=False)
    assert result.returncode != 0 and "timeoutSeconds" in result.stderr
