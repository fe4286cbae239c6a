"""The delegated order (masters, always-allowed paths, then the inner authorizer) and the exact
403 and 500 texts kube-apiserver writes."""

from __future__ import annotations

import pytest

from apiserver.auth import attributes, authorizer
from apiserver.auth import user as users
from tests.unit.apiserver.auth import samples

ALICE = users.UserInfo("alice", groups=("tenants", users.AUTHENTICATED))
G = "/apis/worker.gpustack.ai/v1"


class Nobody:
    def __init__(self) -> None:
        self.asked: list[attributes.Attributes] = []

    async def authorize(self, a: attributes.Attributes) -> authorizer.Verdict:
        self.asked.append(a)
        return authorizer.NO_OPINION


async def test_masters_are_always_allowed_without_asking() -> None:
    inner = Nobody()
    judge = authorizer.Delegating(inner)
    admin = users.UserInfo("system:kube-aggregator", groups=(users.MASTERS,))
    assert (await judge.authorize(attributes.parse(admin, "DELETE", f"{G}/nodemodelstores/x",
                                                   ""))).allowed
    assert inner.asked == []


@pytest.mark.parametrize(("path", "allowed"), [
    ("/healthz", True), ("/readyz", True), ("/livez", True), ("/healthz/", True),
    ("/openapi/v2", False), ("/version", False), ("/readyzz", False), ("/livez/ping", False),
])  # fmt: skip
async def test_always_allowed_paths(path: str, allowed: bool) -> None:
    judge = authorizer.Delegating(Nobody())
    anonymous = attributes.parse(users.ANONYMOUS_USER, "GET", path, "")
    assert (await judge.authorize(anonymous)).allowed is allowed


async def test_prefix_paths_and_resource_requests() -> None:
    judge = authorizer.Delegating(Nobody(), always_allow_paths=("/livez*",))
    assert (await judge.authorize(attributes.parse(ALICE, "GET", "/livez/ping", ""))).allowed
    # a resource request never matches a path rule
    resource = attributes.parse(ALICE, "GET", f"{G}/nodemodelstores", "")
    assert not (await authorizer.Delegating(Nobody(), always_allow_paths=(
        "/apis/*",)).authorize(resource)).allowed


def test_forbidden_text_matches_kube_for_a_namespaced_list() -> None:
    recorded = samples.load("forbidden-status")
    group = recorded["details"]["group"]
    found = attributes.parse(ALICE, "GET", f"/apis/{group}/v1/namespaces/team-b/modelartifacts",
                             "")
    body = authorizer.forbidden(found).body()
    assert body == recorded


def test_forbidden_texts() -> None:
    progress = attributes.parse(ALICE, "GET", f"{G}/namespaces/team-b/modelartifacts/qwen/progress",
                                "")
    refused = authorizer.forbidden(progress)
    assert refused.message == (
        'modelartifacts.worker.gpustack.ai "qwen" is forbidden: User "alice" cannot get resource '
        '"modelartifacts/progress" in API group "worker.gpustack.ai" in the namespace "team-b"')
    assert refused.details == {"name": "qwen", "group": "worker.gpustack.ai",
                               "kind": "modelartifacts"}
    cluster = attributes.parse(ALICE, "GET", f"{G}/modelartifacts", "")
    assert authorizer.forbidden(cluster).message == (
        'modelartifacts.worker.gpustack.ai is forbidden: User "alice" cannot list resource '
        '"modelartifacts" in API group "worker.gpustack.ai" at the cluster scope')
    path = attributes.parse(users.ANONYMOUS_USER, "GET", "/openapi/v2", "")
    refusal = authorizer.forbidden(path)
    assert refusal.message == 'forbidden: User "system:anonymous" cannot get path "/openapi/v2"'
    assert refusal.body()["details"] == {}
    with_reason = authorizer.forbidden(cluster, "not <allowed> & so on")
    assert with_reason.message.endswith(": not &lt;allowed&gt; &amp; so on")


def test_unbounded_values_are_cut() -> None:
    huge = attributes.parse(users.UserInfo("u" * 100_000), "GET",
                            f"{G}/namespaces/{'n' * 100_000}/modelartifacts/{'x' * 100_000}", "")
    assert len(authorizer.forbidden(huge).message) < 2000
    assert len(authorizer.unavailable(huge, "e" * 100_000).message) < 2000


def test_unavailable_is_a_500_status() -> None:
    failed = authorizer.unavailable(attributes.parse(ALICE, "GET", "/openapi/v2", ""),
                                    "SubjectAccessReview failed: connection refused")
    assert failed.code == 500
    assert failed.message.startswith('Internal Server Error: "/openapi/v2": ')
