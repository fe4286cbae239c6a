"""The self reviews behind the real filter (static tokens, impersonation, the local RBAC policy):
kube's answer shapes, the impersonated user as the subject, protobuf bodies, bounded 4xx
refusals, and their groups in discovery only when a mode adds them."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from apiserver import errors
from apiserver.auth import authenticator, authorizer, bearer, middleware, policy, rbac, static
from apiserver.auth import user as users
from apiserver.endpoints import discovery, kubeprotobuf, selfreviews
from apiserver.wiring import app

ADMIN = {"Authorization": "Bearer admin-token"}
ALICE = {"Authorization": "Bearer alice-token"}
AS_ALICE = {**ADMIN, "Impersonate-User": "alice", "Impersonate-Group": "tenants"}
ACCESS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RULES = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
WHO = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TABLE = static.TokenTable([
    static.Entry("admin-token", "admin", "admin-uid", (users.MASTERS,)),
    static.Entry("alice-token", "alice", "alice-uid", ("tenants",), (("team", "a"),)),
])  # fmt: skip
READER = [
    {"apiVersion": rbac.API_VERSION, "kind": "Role",
     "metadata": {"name": "reader", "namespace": "team-a"},
     "rules": [{"apiGroups": ["worker.gpustack.ai"], "verbs": ["get", "list", "watch"],
                "resources": ["modelartifacts", "modelartifacts/progress"]}]},
    {"apiVersion": rbac.API_VERSION, "kind": "RoleBinding",
     "metadata": {"name": "alice-reader", "namespace": "team-a"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
     "subjects": [{"kind": "User", "name": "alice"}]},
]


def _application(groups: tuple[discovery.Group, ...]) -> middleware.Filter:
    local = policy.builtin(worker="w", plugin="p") + rbac.parse(READER)
    evaluator = rbac.Evaluator(local)
    judge = authorizer.Delegating(evaluator)
    routes = [*discovery.routes(extra=groups)]
    if groups:
        routes += selfreviews.routes(judge, evaluator.rules_for)
    inner = Starlette(routes=routes, exception_handlers={errors.StatusError: app.render,
                                                         HTTPException: app.render_http})
    return middleware.Filter(
        inner, authentication=authenticator.Chain([bearer.Bearer([bearer.StaticTokens(TABLE)])]),
        authorization=judge)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(_application(selfreviews.GROUPS))
    async with httpx.AsyncClient(transport=transport, base_url="https://t") as found:
        yield found


def _resource(**attributes: str) -> dict[str, Any]:
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},  # as client-go writes an empty one
            "spec": {"resourceAttributes": attributes}}


async def test_an_allowed_review_in_kubes_shape(client: httpx.AsyncClient) -> None:
    sent = _resource(namespace="team-a", verb="get", group="worker.gpustack.ai",
                     resource="modelartifacts", subresource="progress", name="qwen")
    response = await client.post(ACCESS, json=sent, headers=ALICE)
    assert response.status_code == 201, response.text
    assert response.json() == {
        "kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
        "metadata": {}, "spec": sent["spec"],
        "status": {"allowed": True, "reason": 'RBAC: allowed by RoleBinding'
                   ' "alice-reader/team-a" of Role "reader" to User "alice"'}}


async def test_a_refusal_is_allowed_false_alone(client: httpx.AsyncClient) -> None:
    response = await client.post(ACCESS, json=_resource(
        namespace="team-b", verb="list", group="worker.gpustack.ai", resource="modelartifacts",
        version=""), headers=ALICE)
    assert response.status_code == 201, response.text
    assert response.json()["status"] == {"allowed": False}
    # an empty attribute is left out of the echo, as kube's omitempty does
    assert response.json()["spec"]["resourceAttributes"] == {
        "namespace": "team-b", "verb": "list", "group": "worker.gpustack.ai",
        "resource": "modelartifacts"}


async def test_the_impersonated_user_is_the_subject(client: httpx.AsyncClient) -> None:
    may = _resource(namespace="team-a", verb="list", group="worker.gpustack.ai",
                    resource="modelartifacts")
    may_not = _resource(verb="delete", group="worker.gpustack.ai", resource="nodemodelstores")
    assert (await client.post(ACCESS, json=may_not, headers=ADMIN)).json()["status"] == {
        "allowed": True}
    assert (await client.post(ACCESS, json=may_not, headers=AS_ALICE)).json()["status"] == {
        "allowed": False}
    assert (await client.post(ACCESS, json=may, headers=AS_ALICE)).json()["status"]["allowed"]
    masters = {**AS_ALICE, "Impersonate-Group": users.MASTERS}
    assert (await client.post(ACCESS, json=may_not, headers=masters)).json()["status"] == {
        "allowed": True}


async def test_a_non_resource_review(client: httpx.AsyncClient) -> None:
    sent = {"spec": {"nonResourceAttributes": {"path": "/version", "verb": "get"}}}
    response = await client.post(ACCESS, json=sent, headers=ALICE)
    assert response.status_code == 201, response.text
    assert response.json()["spec"] == sent["spec"]
    assert response.json()["status"]["allowed"] is True
    refused = await client.post(ACCESS, json={"spec": {"nonResourceAttributes": {
        "path": "/metrics", "verb": "get"}}}, headers=ALICE)
    assert refused.json()["status"] == {"allowed": False}


def _field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


async def test_a_protobuf_review_as_kubectl_sends_it(client: httpx.AsyncClient) -> None:
    attributes = (_field(1, b"team-a") + _field(2, b"list") + _field(3, b"worker.gpustack.ai")
                  + _field(5, b"modelartifacts"))
    raw = _field(1, b"") + _field(2, _field(1, attributes))
    meta = _field(1, b"authorization.k8s.io/v1") + _field(2, b"SelfSubjectAccessReview")
    body = kubeprotobuf.MAGIC + _field(1, meta) + _field(2, raw)
    response = await client.post(ACCESS, content=body, headers={
        **ALICE, "Content-Type": kubeprotobuf.MEDIA_TYPE,
        "Accept": "application/vnd.kubernetes.protobuf, application/json"})
    assert response.status_code == 201, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["status"]["allowed"] is True
    assert response.json()["spec"]["resourceAttributes"]["namespace"] == "team-a"


def _causes(response: httpx.Response) -> list[str]:
    body = response.json()
    assert response.status_code == 422, response.text
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    assert body["details"]["kind"] == "SelfSubjectAccessReview"
    return [cause["field"] for cause in body["details"]["causes"]]


async def test_bad_specs_are_422_naming_the_field(client: httpx.AsyncClient) -> None:
    both = {"spec": {"resourceAttributes": {"verb": "get"},
                     "nonResourceAttributes": {"path": "/x", "verb": "get"}}}
    for spec in (both, {"spec": {}}, {}):
        response = await client.post(ACCESS, json=spec, headers=ALICE)
        assert _causes(response) == ["spec.resourceAttributes"]
        assert ("exactly one of nonResourceAttributes or resourceAttributes must be specified"
                in response.json()["message"])
    wrong = await client.post(ACCESS, json=_resource(verb=3, name=["x"]),  # type: ignore[arg-type]
                              headers=ALICE)
    assert _causes(wrong) == ["spec.resourceAttributes.verb", "spec.resourceAttributes.name"]
    assert _causes(await client.post(ACCESS, json={"spec": []}, headers=ALICE)) == ["spec"]
    assert _causes(await client.post(ACCESS, json={"spec": {"resourceAttributes": "x"}},
                                     headers=ALICE)) == ["spec.resourceAttributes"]
    named = {**_resource(verb="get"), "metadata": {"name": "n"}}
    assert _causes(await client.post(ACCESS, json=named, headers=ALICE)) == ["metadata"]


async def test_long_values_are_refused_without_being_echoed(client: httpx.AsyncClient) -> None:
    long = await client.post(ACCESS, json=_resource(verb="get", name="n" * 5000), headers=ALICE)
    assert _causes(long) == ["spec.resourceAttributes.name"]
    assert "Too long" in long.text and "n" * 300 not in long.text
    huge = {**_resource(verb="get"), "metadata": {"labels": {"k": "v" * 100_000}}}
    refused = await client.post(ACCESS, json=huge, headers=ALICE)
    assert _causes(refused) == ["metadata"] and len(refused.content) < 4096
    # what is not an attribute (an unknown field, selectors) is neither judged nor echoed
    extra = _resource(verb="get", resource="modelartifacts")
    extra["spec"]["resourceAttributes"]["labelSelector"] = {"rawSelector": "x" * 10_000}
    extra["spec"]["unknown"] = "y" * 10_000
    response = await client.post(ACCESS, json=extra, headers=ALICE)
    assert response.status_code == 201 and len(response.content) < 1024, response.text


async def test_another_kind_or_version_is_a_400(client: httpx.AsyncClient) -> None:
    kind = await client.post(ACCESS, json={**_resource(verb="get"), "kind": "K" * 5000},
                             headers=ALICE)
    assert kind.status_code == 400, kind.text
    assert "must be of type SelfSubjectAccessReview" in kind.json()["message"]
    assert len(kind.content) < 1024
    version = await client.post(ACCESS, json={**_resource(verb="get"),
                                              "apiVersion": "authorization.k8s.io/v1beta1"},
                                headers=ALICE)
    assert version.status_code == 400, version.text
    assert version.json()["message"] == (
        "the API version in the data (authorization.k8s.io/v1beta1) does not match the expected"
        " API version (authorization.k8s.io/v1)")
    rules = await client.post(RULES, json={"kind": "SelfSubjectAccessReview"}, headers=ALICE)
    assert rules.status_code == 400 and "SelfSubjectRulesReview" in rules.json()["message"]
    assert (await client.post(ACCESS, content=b"[1]", headers={
        **ALICE, "Content-Type": "application/json"})).status_code == 400


async def test_rules_of_a_namespace(client: httpx.AsyncClient) -> None:
    sent = {"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": {"namespace": "team-a"}}
    response = await client.post(RULES, json=sent, headers=AS_ALICE)
    assert response.status_code == 201, response.text
    body = response.json()
    assert list(body) == ["kind", "apiVersion", "metadata", "spec", "status"]
    assert body["spec"] == {} and body["metadata"] == {}
    assert list(body["status"]) == ["resourceRules", "nonResourceRules", "incomplete"]
    assert body["status"]["incomplete"] is False
    assert {"verbs": ["get", "list", "watch"], "apiGroups": ["worker.gpustack.ai"],
            "resources": ["modelartifacts", "modelartifacts/progress"]} in body["status"][
        "resourceRules"]
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in body[
        "status"]["resourceRules"]
    assert any("/version" in rule["nonResourceURLs"]
               for rule in body["status"]["nonResourceRules"])
    elsewhere = await client.post(RULES, json={"spec": {"namespace": "team-b"}}, headers=ALICE)
    assert not any("worker.gpustack.ai" in rule.get("apiGroups", [])
                   for rule in elsewhere.json()["status"]["resourceRules"])
    long = await client.post(RULES, json={"spec": {"namespace": "n" * 2000}}, headers=ALICE)
    assert long.status_code == 422 and "spec.namespace" in long.text
    assert "n" * 300 not in long.text


@pytest.mark.parametrize("version", selfreviews.REVIEW_VERSIONS)
async def test_who_am_i(client: httpx.AsyncClient, version: str) -> None:
    path = f"/apis/authentication.k8s.io/{version}/selfsubjectreviews"
    response = await client.post(path, json={}, headers=ALICE)
    assert response.status_code == 201, response.text
    body = response.json()
    assert list(body) == ["kind", "apiVersion", "metadata", "status"]
    assert (body["kind"], body["apiVersion"]) == ("SelfSubjectReview",
                                                  f"authentication.k8s.io/{version}")
    stamp = datetime.datetime.strptime(body["metadata"]["creationTimestamp"],
                                       "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    assert abs((datetime.datetime.now(datetime.UTC) - stamp).total_seconds()) < 60
    assert body["status"]["userInfo"] == {
        "username": "alice", "uid": "alice-uid", "groups": ["tenants", users.AUTHENTICATED],
        "extra": {"team": ["a"]}}


async def test_who_am_i_as_someone_else(client: httpx.AsyncClient) -> None:
    response = await client.post(WHO, headers=AS_ALICE)
    assert response.status_code == 201, response.text
    assert response.json()["status"]["userInfo"] == {
        "username": "alice", "groups": ["tenants", users.AUTHENTICATED]}


async def test_only_post_and_only_with_a_user(client: httpx.AsyncClient) -> None:
    for path in (ACCESS, RULES, WHO):
        response = await client.get(path, headers=ADMIN)
        assert response.status_code == 405 and response.json()["kind"] == "Status", path
        anonymous = await client.post(path, json={})
        assert anonymous.status_code == 403, anonymous.text


async def test_discovery_lists_the_groups_beside_ours(client: httpx.AsyncClient) -> None:
    groups = (await client.get("/apis", headers=ALICE)).json()["groups"]
    assert [group["name"] for group in groups] == [
        "authentication.k8s.io", "authorization.k8s.io", "worker.gpustack.ai"]
    assert groups[0]["preferredVersion"] == {"groupVersion": "authentication.k8s.io/v1",
                                             "version": "v1"}
    group = (await client.get("/apis/authorization.k8s.io", headers=ALICE)).json()
    version = {"groupVersion": "authorization.k8s.io/v1", "version": "v1"}
    assert group == {"kind": "APIGroup", "apiVersion": "v1", "name": "authorization.k8s.io",
                     "versions": [version], "preferredVersion": version}
    listed = (await client.get("/apis/authorization.k8s.io/v1", headers=ALICE)).json()
    assert listed == {"kind": "APIResourceList", "apiVersion": "v1",
                      "groupVersion": "authorization.k8s.io/v1", "resources": [
        {"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview",
         "namespaced": False, "kind": "SelfSubjectAccessReview", "verbs": ["create"]},
        {"name": "selfsubjectrulesreviews", "singularName": "selfsubjectrulesreview",
         "namespaced": False, "kind": "SelfSubjectRulesReview", "verbs": ["create"]}]}
    for version_name in selfreviews.REVIEW_VERSIONS:
        listed = (await client.get(f"/apis/authentication.k8s.io/{version_name}",
                                   headers=ALICE)).json()
        assert [r["name"] for r in listed["resources"]] == ["selfsubjectreviews"]


@pytest.mark.parametrize("version", discovery.AGGREGATED_VERSIONS)
async def test_aggregated_discovery_lists_them(client: httpx.AsyncClient, version: str) -> None:
    accept = discovery.content_type(version)
    body = (await client.get("/apis", headers={**ALICE, "Accept": accept})).json()
    items = {item["metadata"]["name"]: item for item in body["items"]}
    assert list(items) == ["authentication.k8s.io", "authorization.k8s.io",
                           "worker.gpustack.ai"]
    (v1,) = items["authorization.k8s.io"]["versions"]
    assert v1["version"] == "v1" and v1["freshness"] == "Current"
    assert v1["resources"][0] == {
        "resource": "selfsubjectaccessreviews",
        "responseKind": {"group": "authorization.k8s.io", "version": "v1",
                         "kind": "SelfSubjectAccessReview"},
        "scope": "Cluster", "singularResource": "selfsubjectaccessreview", "verbs": ["create"]}
    assert [v["version"] for v in items["authentication.k8s.io"]["versions"]] == list(
        selfreviews.REVIEW_VERSIONS)


async def test_without_the_groups_nothing_is_served_or_listed() -> None:
    # cluster mode: kube-apiserver answers the reviews, and our discovery names only our group
    transport = httpx.ASGITransport(_application(()))
    async with httpx.AsyncClient(transport=transport, base_url="https://t") as client:
        groups = (await client.get("/apis", headers=ALICE)).json()["groups"]
        assert [group["name"] for group in groups] == ["worker.gpustack.ai"]
        aggregated = (await client.get("/apis", headers={
            **ALICE, "Accept": discovery.content_type("v2")})).json()
        assert [item["metadata"]["name"] for item in aggregated["items"]] == [
            "worker.gpustack.ai"]
        for path in ("/apis/authorization.k8s.io", "/apis/authorization.k8s.io/v1"):
            assert (await client.get(path, headers=ADMIN)).status_code == 404
        assert (await client.post(ACCESS, json=_resource(verb="get"),
                                  headers=ADMIN)).status_code == 404
