"""The RBAC table's matching and reasons, the review validation, and front-proxy rotation."""

from __future__ import annotations

import json

import pytest

from devkit.controlplane import (
    FrontProxy,
    Policy,
    Role,
    Rule,
    Subject,
    UserInfo,
    reviews,
    status,
)
from devkit.controlplane.rbac import Attributes, Binding

ALICE = UserInfo("alice", groups=("tenants", "system:authenticated"))
SA = UserInfo("system:serviceaccount:gpustack-system:worker", groups=("system:serviceaccounts",))


def _get(user: UserInfo, resource: str, namespace: str = "team-a", **more: str) -> Attributes:
    return Attributes(user=user, verb=more.pop("verb", "get"), resource_request=True,
                      namespace=namespace, group=more.pop("group", "worker.gpustack.ai"),
                      resource=resource, **more)  # fmt: skip


def test_cluster_role_through_a_role_binding_is_namespaced() -> None:
    policy = Policy()
    policy.add_role(Role("artifact-reader", (Rule(("get",), ("worker.gpustack.ai",),
                                                   ("modelartifacts",)),)))  # fmt: skip
    policy.add_binding(Binding("tenants-read", "ClusterRole", "artifact-reader",
                               (Subject("Group", "tenants"),), namespace="team-a"))  # fmt: skip
    allowed = policy.authorize(_get(ALICE, "modelartifacts"))
    assert allowed.reason == (
        'RBAC: allowed by RoleBinding "tenants-read/team-a" of ClusterRole "artifact-reader" to '
        'Group "tenants"'
    )
    assert not policy.authorize(_get(ALICE, "modelartifacts", namespace="team-b")).allowed
    assert not policy.authorize(_get(ALICE, "modelartifacts", namespace="")).allowed


def test_service_account_subjects_and_wildcards() -> None:
    policy = Policy()
    policy.grant(Subject("ServiceAccount", "worker", "gpustack-system"),
                 Rule(("*",), ("*",), ("*/status",)), name="status-writer")  # fmt: skip
    decision = policy.authorize(_get(SA, "nodemodelstores", namespace="", subresource="status",
                                     verb="patch"))  # fmt: skip
    assert decision.reason == (
        'RBAC: allowed by ClusterRoleBinding "status-writer" of ClusterRole "status-writer" to '
        'ServiceAccount "worker/gpustack-system"'
    )
    assert not policy.authorize(_get(SA, "nodemodelstores", namespace="", verb="patch")).allowed


def test_non_resource_urls_and_bootstrap_discovery() -> None:
    policy = Policy()
    anonymous = UserInfo("system:anonymous", groups=("system:unauthenticated",))
    def path(user: UserInfo, p: str) -> bool:
        return policy.authorize(Attributes(user=user, verb="get", resource_request=False,
                                           path=p)).allowed  # fmt: skip
    assert path(ALICE, "/apis/worker.gpustack.ai/v1") and path(ALICE, "/openapi/v3/apis")
    assert path(anonymous, "/version") and not path(anonymous, "/apis")
    assert not path(ALICE, "/metrics")
    assert not Policy(bootstrap=False).authorize(
        Attributes(user=ALICE, verb="get", resource_request=False, path="/version")
    ).allowed


def test_sar_validation_is_422_and_forbidden_texts() -> None:
    with pytest.raises(status.StatusError) as neither:
        reviews.subject_access_review({"spec": {"user": "a"}}, Policy(), "m")
    assert neither.value.code == 422
    assert "exactly one of nonResourceAttributes or resourceAttributes" in neither.value.body[
        "message"]  # fmt: skip
    with pytest.raises(status.StatusError) as nobody:
        reviews.subject_access_review(
            {"spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}}, Policy(), "m"
        )
    assert "at least one of user or group must be specified" in nobody.value.body["message"]
    body = status.forbidden(_get(ALICE, "modelartifacts", name="qwen", subresource="progress"))
    assert body["message"] == (
        'modelartifacts.worker.gpustack.ai "qwen" is forbidden: User "alice" cannot get resource '
        '"modelartifacts/progress" in API group "worker.gpustack.ai" in the namespace "team-a"'
    )
    assert body["details"] == {"name": "qwen", "group": "worker.gpustack.ai",
                               "kind": "modelartifacts"}  # fmt: skip


def test_front_proxy_rotation_keeps_or_drops_the_old_ca() -> None:
    proxy = FrontProxy(uid_headers=["X-Remote-Uid"])
    old = proxy.ca.cert_pem
    proxy.rotate(keep_previous=True)
    assert proxy.ca_bundle == proxy.ca.cert_pem + old
    proxy.rotate()
    assert proxy.ca_bundle == proxy.ca.cert_pem
    data = proxy.configmap_data(None)
    assert "client-ca-file" not in data
    assert json.loads(data["requestheader-uid-headers"]) == ["X-Remote-Uid"]
    assert FrontProxy(allowed_names=None).configmap_data(None)[
        "requestheader-allowed-names"] == "null"  # fmt: skip
