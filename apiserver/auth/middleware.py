"""The ASGI filter in front of every route: authenticate, impersonate, authorize.

Per request, in kube-apiserver's order: the authenticator chain finds the user (401 ``Status``
when a credential was bad, anonymous when there was none); impersonation headers, when present,
are authorized for that user and replace it; the request is parsed once
(``apiserver.request.info``, kept in the scope for every later reader) and its attributes are
judged by the authorizer: allowed requests reach the routes with ``scope["user"]`` and
``scope[ATTRIBUTES]``; refused ones get kube's 403, and ones that could not be judged (an outage)
fail closed with a 500. A request that repeats a single-valued header is refused (400) before
authentication; one whose query or path cannot be served as parsed (a repeated single-valued
parameter, a malformed option) is refused (400) right after authorization, as kube-apiserver
answers a caller who may not ask with the 403 first. No credential is ever logged or echoed.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from apiserver import errors
from apiserver.auth import attributes as attrs
from apiserver.auth import authenticator, authorizer, impersonation
from apiserver.auth import user as users
from apiserver.request import headers as single_headers
from apiserver.request import info as infos

log = logging.getLogger(__name__)

ATTRIBUTES = "auth.attributes"
"""Scope key of the request's ``Attributes`` (set for every request that passed)."""
TLS_EXTENSION = "tls"
PEER_CHAIN = "peer_chain_der"
"""``scope["extensions"]["tls"][PEER_CHAIN]``: the TLS-verified client chain, leaf first (DER),
put there by ``apiserver.serving``; never derived from anything the client sends in HTTP."""


def peer_chain(scope: Scope) -> tuple[bytes, ...]:
    extensions: dict[str, Any] = scope.get("extensions") or {}
    tls = extensions.get(TLS_EXTENSION)
    if not isinstance(tls, dict):
        return ()
    chain = tls.get(PEER_CHAIN)
    return tuple(chain) if isinstance(chain, tuple | list) else ()


def user_of(scope: Scope) -> users.UserInfo:
    found = scope.get("user")
    return found if isinstance(found, users.UserInfo) else users.ANONYMOUS_USER


class Filter:
    def __init__(
        self,
        app: ASGIApp,
        *,
        authentication: authenticator.Chain,
        authorization: authorizer.Authorizer,
        impersonation: bool = True,
    ) -> None:
        self.app = app
        self.authentication = authentication
        self.authorization = authorization
        self.impersonation = impersonation

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            # lifespan passes through; no route serves websockets, so the router refuses them
            await self.app(scope, receive, send)
            return
        credentials = authenticator.Credentials.from_asgi(scope["headers"], peer_chain(scope))
        repeated = single_headers.problem(credentials.headers)
        if repeated is not None:
            await errors.send(send, repeated)
            return
        result = await self.authentication.authenticate(credentials)
        if result.user is None:
            log.debug("unauthenticated %s %s: %s", scope["method"], scope["path"],
                      "; ".join(result.errors))
            await errors.send(send, errors.Unauthorized("Unauthorized"))
            return
        try:
            user = result.user
            if self.impersonation:
                wanted = impersonation.requested(credentials)
                if wanted is not None:
                    user = await impersonation.impersonate(user, wanted, self.authorization)
            request = infos.of(scope)
            attributes = attrs.of(user, request)
            verdict = await self.authorization.authorize(attributes)
            if not verdict.allowed:
                if verdict.error:
                    raise authorizer.unavailable(attributes, verdict.error)
                raise authorizer.forbidden(attributes, verdict.reason)
            request.served()  # authorized as parsed; refuse it now if it cannot be served so
        except errors.StatusError as err:
            await errors.send(send, err)
            return
        scope["user"] = user
        scope[ATTRIBUTES] = attributes
        await self.app(scope, receive, send)
