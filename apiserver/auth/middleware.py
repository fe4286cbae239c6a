"""Pure ASGI authentication: a bearer token becomes ``scope["user"]``, or the request gets 401.

The health paths stay open (probes carry no credentials); they see an anonymous user when no
valid token is sent. The token itself is never logged or echoed.
"""

from __future__ import annotations

from typing import Protocol

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from apiserver import errors
from apiserver.auth import user

OPEN_PATHS = ("/healthz", "/livez", "/readyz")
ANONYMOUS = user.UserInfo(name=user.ANONYMOUS, groups=("system:unauthenticated",))


class Authenticator(Protocol):
    def authenticate(self, token: str) -> user.UserInfo | None: ...


class Authentication:
    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        open_paths: tuple[str, ...] = OPEN_PATHS,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            # lifespan passes through; no route serves websockets, so the router refuses them
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        identity = self.authenticator.authenticate(token) if token else None
        if identity is None:
            if not self._is_open(scope["path"]):
                await _unauthorized(send)
                return
            identity = ANONYMOUS
        scope["user"] = identity
        await self.app(scope, receive, send)

    def _is_open(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.open_paths)


def bearer_token(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"authorization":
            text: str = value.decode("latin-1")
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
            return ""
    return ""


async def _unauthorized(send: Send) -> None:
    body = orjson.dumps(errors.Unauthorized("Unauthorized").body())
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
