"""The filter in front of every route: 401 Status for a bad credential, anonymous without one,
kube's 403 for a refusal, 500 when authorization cannot be decided, impersonation, and the user
and attributes handed to the routes."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from apiserver.auth import (
    attributes,
    authenticator,
    authorizer,
    bearer,
    middleware,
    policy,
    rbac,
    static,
)
from apiserver.auth import user as users

TABLE = static.TokenTable([
    static.Entry("good-token", "alice", "u1", ("dev",)),
    static.Entry("admin-token", "admin", "admin", (users.MASTERS,)),
])  # fmt: skip
G = "/apis/worker.gpustack.ai/v1"


async def whoami(request: Request) -> JSONResponse:
    info = middleware.user_of(request.scope)
    found: attributes.Attributes = request.scope[middleware.ATTRIBUTES]
    return JSONResponse({"name": info.name, "groups": list(info.groups), "verb": found.verb})


class Broken:
    async def authorize(self, a: attributes.Attributes) -> authorizer.Verdict:
        return authorizer.Verdict(authorizer.Decision.NO_OPINION, error="SAR failed: refused")


def _client(judge: authorizer.Authorizer | None = None,
            chain: authenticator.Chain | None = None) -> httpx.AsyncClient:
    routes = [Route(p, whoami, methods=["GET", "POST"]) for p in (
        "/whoami", "/readyz", "/apis", f"{G}/namespaces/dev/modelartifacts")]
    local = policy.builtin(worker="w", plugin="p") + rbac.parse([
        {"apiVersion": rbac.API_VERSION, "kind": "ClusterRole", "metadata": {"name": "who"},
         "rules": [{"nonResourceURLs": ["/whoami"], "verbs": ["get"]}]},
        {"apiVersion": rbac.API_VERSION, "kind": "ClusterRoleBinding",
         "metadata": {"name": "who"}, "roleRef": {"kind": "ClusterRole", "name": "who"},
         "subjects": [{"kind": "Group", "name": "dev"}]},
    ])  # fmt: skip
    wrapped = middleware.Filter(
        Starlette(routes=routes),
        authentication=chain or authenticator.Chain([bearer.Bearer([bearer.StaticTokens(TABLE)])]),
        authorization=judge or authorizer.Delegating(rbac.Evaluator(local)),
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(wrapped), base_url="https://test")


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_valid_token_sets_user_and_attributes() -> None:
    async with _client() as client:
        response = await client.get("/whoami", headers=_bearer("good-token"))
    assert response.status_code == 200
    assert response.json() == {"name": "alice", "groups": ["dev", users.AUTHENTICATED],
                               "verb": "get"}


async def test_scheme_is_case_insensitive() -> None:
    async with _client() as client:
        response = await client.get("/whoami", headers={"Authorization": "bearer good-token"})
    assert response.status_code == 200


async def test_unknown_token_is_401_status_without_the_token() -> None:
    async with _client() as client:
        response = await client.get("/whoami", headers=_bearer("wrong-secret"))
    assert response.status_code == 401
    assert response.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
    }  # fmt: skip
    assert "wrong-secret" not in response.text


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic Z29vZC10b2tlbg=="}])
async def test_no_credential_is_anonymous_and_refused_by_kubes_403(
        headers: dict[str, str]) -> None:
    async with _client() as client:
        response = await client.get("/whoami", headers=headers)
        listing = await client.get(f"{G}/namespaces/dev/modelartifacts", headers=headers)
    assert response.status_code == 403
    assert response.json()["message"] == (
        'forbidden: User "system:anonymous" cannot get path "/whoami"')
    assert listing.status_code == 403
    assert listing.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'modelartifacts.worker.gpustack.ai is forbidden: User "system:anonymous" '
                   'cannot list resource "modelartifacts" in API group "worker.gpustack.ai" in '
                   'the namespace "dev"',
        "reason": "Forbidden", "details": {"group": "worker.gpustack.ai",
                                           "kind": "modelartifacts"}, "code": 403,
    }  # fmt: skip


async def test_health_paths_stay_open_as_anonymous() -> None:
    async with _client() as client:
        response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["name"] == users.ANONYMOUS


async def test_discovery_is_for_authenticated_users() -> None:
    async with _client() as client:
        assert (await client.get("/apis", headers=_bearer("good-token"))).status_code == 200
        assert (await client.get("/apis")).status_code == 403


async def test_an_authorization_outage_fails_closed_with_500() -> None:
    async with _client(Broken()) as client:
        response = await client.get("/whoami", headers=_bearer("good-token"))
    assert response.status_code == 500
    assert response.json()["reason"] == "InternalError"
    assert "SAR failed" in response.json()["message"]


async def test_impersonation_by_the_admin_only() -> None:
    async with _client() as client:
        acting = await client.get("/whoami", headers={
            **_bearer("admin-token"), "Impersonate-User": "carol", "Impersonate-Group": "dev"})
        refused = await client.get("/whoami", headers={
            **_bearer("good-token"), "Impersonate-User": "admin"})
        headless = await client.get("/whoami", headers={
            **_bearer("admin-token"), "Impersonate-Group": "dev"})
    assert acting.status_code == 200
    assert acting.json()["name"] == "carol"
    assert acting.json()["groups"] == ["dev", users.AUTHENTICATED]
    assert refused.status_code == 403
    assert refused.json()["message"].startswith('users "admin" is forbidden: User "alice" cannot '
                                                'impersonate resource "users"')
    assert headless.status_code == 500


async def test_other_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    wrapped = middleware.Filter(app, authentication=authenticator.Chain([]),
                                authorization=Broken())
    await wrapped({"type": "lifespan"}, None, None)  # type: ignore[arg-type]
    assert seen == ["lifespan"]


def test_peer_chain_only_from_the_tls_extension() -> None:
    assert middleware.peer_chain({"type": "http"}) == ()
    assert middleware.peer_chain({"extensions": {"tls": {"peer_chain_der": (b"a", b"b")}}}) == (
        b"a", b"b")
    assert middleware.peer_chain({"extensions": {"tls": "nonsense"}}) == ()
