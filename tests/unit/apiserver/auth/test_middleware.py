"""Bearer-token authentication middleware: 401 Status, open health paths, scope["user"]."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from apiserver.auth import middleware, static, user

TABLE = static.TokenTable([static.Entry("good-token", "alice", "u1", ("dev",))])


async def whoami(request: Request) -> JSONResponse:
    info: user.UserInfo = request.scope["user"]
    return JSONResponse({"name": info.name, "groups": list(info.groups)})


def _client() -> httpx.AsyncClient:
    app = Starlette(routes=[Route("/whoami", whoami), Route("/readyz", whoami)])
    wrapped = middleware.Authentication(app, authenticator=TABLE)
    return httpx.AsyncClient(transport=httpx.ASGITransport(wrapped), base_url="https://test")


async def test_valid_token_sets_user() -> None:
    async with _client() as client:
        response = await client.get("/whoami", headers={"Authorization": "Bearer good-token"})
    assert response.status_code == 200
    assert response.json() == {"name": "alice", "groups": ["dev", user.AUTHENTICATED]}


async def test_scheme_is_case_insensitive() -> None:
    async with _client() as client:
        response = await client.get("/whoami", headers={"Authorization": "bearer good-token"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic Z29vZC10b2tlbg=="}],
)
async def test_missing_or_unknown_token_is_401_status(headers: dict[str, str]) -> None:
    async with _client() as client:
        response = await client.get("/whoami", headers=headers)
    assert response.status_code == 401
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    assert "wrong" not in response.text


async def test_health_paths_stay_open_as_anonymous() -> None:
    async with _client() as client:
        response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["name"] == user.ANONYMOUS


async def test_prefix_of_open_path_is_not_open() -> None:
    assert not middleware.Authentication(Starlette(), TABLE)._is_open("/readyzz")
    assert middleware.Authentication(Starlette(), TABLE)._is_open("/livez/ping")
