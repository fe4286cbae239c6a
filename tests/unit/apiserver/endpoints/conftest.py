"""Fixtures for the endpoint tests: the resource routes in a minimal app, driven over ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette import applications, requests, responses
from starlette.types import ASGIApp, Receive, Scope, Send

from apiserver import errors
from apiserver.admission import chain
from apiserver.auth import user as users
from apiserver.endpoints import resources
from apiserver.registry import build
from apiserver.wiring import app
from controllers.nodeview import view as views
from devkit import admitting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
PLUGIN = "system:serviceaccount:gpustack-system:model-manager-node"
PLUGIN_ON = "plugin@"
"""``X-Test-User: plugin@<node>``: the node plugin with a token bound to its Pod on <node>."""


def status_guards() -> chain.Chain:
    """The chain the registry fixture's stores ask (its writers guard the status routes)."""
    return admitting.standalone(WORKER)


class FakeIdentity:
    """Sets ``scope["user"]`` from the ``X-Test-User`` header (default ``admin``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            name = headers.get(b"x-test-user", b"admin").decode()
            if name.startswith(PLUGIN_ON):
                node = name[len(PLUGIN_ON):]
                scope["user"] = users.UserInfo(PLUGIN, groups=(users.AUTHENTICATED,), extra={
                    users.POD_NAME: (f"plugin-{node}",), users.POD_UID: ("uid",),
                    users.NODE_NAME: (node,)})
            else:
                scope["user"] = users.UserInfo(name, groups=(users.AUTHENTICATED,))
        await self.app(scope, receive, send)


async def _render(request: requests.Request, exc: Exception) -> responses.Response:
    return await app.render(request, exc)  # the server's own Status rendering


@pytest.fixture
async def client(registry: build.Registry,
                 progress_view: views.NodeView) -> AsyncIterator[httpx.AsyncClient]:
    app = applications.Starlette(routes=resources.routes(registry, status_guards()),
                                 exception_handlers={errors.StatusError: _render})
    transport = httpx.ASGITransport(app=FakeIdentity(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http
