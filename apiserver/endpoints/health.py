"""Health and version: ``/healthz``, ``/livez``, ``/readyz`` (ready once storage started, for a
backend with its own check such as etcd while that check passes, and while every ``Check`` the
app was given passes, such as the worker identity's) and ``/version`` (kube's ``version.Info``
shape).

A failing ``/readyz`` lists its checks whatever was asked, as kube-apiserver does, each failed
one with its reason when it gives one (``[-]worker-identity failed: ...``): a probe's log then
says why."""

from __future__ import annotations

import asyncio
import importlib.metadata
import platform
import re
import sys
from collections.abc import Sequence
from typing import Protocol

import orjson
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from apiserver.request import info as infos
from apiserver.storage import interface
from openapi import wire

PACKAGE = "model-manager"
BACKEND_CHECK_LIMIT = 10.0
"""An upper bound on the backend probe, whatever its own deadline."""
DEFAULT_MINOR = 33
"""The minor reported to a client whose User-Agent names none: the newest kubectl tested."""
_CLIENT = re.compile(r"[^/\s]+/v1\.(?P<minor>[0-9]{1,3})\.")
_BUILD_UNSAFE = re.compile(r"[^0-9A-Za-z.-]+")


class Check(Protocol):
    """One more readiness check: ``failing`` answers "" while it passes, else why not (short,
    no secret: ``/readyz`` is open to anyone)."""

    name: str

    def failing(self) -> str: ...


def project_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def kubernetes_minor(user_agent: str) -> int:
    """The Kubernetes minor a client was built for, from its User-Agent (client-go writes
    ``kubectl/v1.27.16 (linux/amd64) kubernetes/cbb86e0``), else ``DEFAULT_MINOR``."""
    match = _CLIENT.match(user_agent)
    return int(match["minor"]) if match else DEFAULT_MINOR


def version_info(user_agent: str = "") -> wire.VersionInfo:
    """The shape of kube's ``version.Info``, as a Kubernetes distribution writes it.

    kubectl warns when ``gitVersion``, parsed as semver, is more than one minor away from its
    own, and fails when it does not parse. So ``gitVersion`` is ``v1.<minor>.0`` followed by the
    project version as semver build metadata (``v1.33.0+model-manager-0.1.0``, the way k3s writes
    ``v1.30.2+k3s1``), with the minor of the client asking (read from its User-Agent; the newest
    tested kubectl's otherwise): this server speaks the same API to every kubectl from 1.27 on.
    The Go-specific fields name the Python runtime. Behind kube-apiserver clients never see this
    (``/version`` is kube-apiserver's own).
    """
    minor = kubernetes_minor(user_agent)
    build = _BUILD_UNSAFE.sub("-", project_version()).strip("-.") or "0"
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return {
        "major": "1",
        "minor": str(minor),
        "gitVersion": f"v1.{minor}.0+{PACKAGE}-{build}",
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": f"python{platform.python_version()}",
        "compiler": sys.implementation.name,
        "platform": f"{sys.platform}/{machine}",
    }


async def alive(request: Request) -> Response:
    return _check(request, {"ping": True}, "healthz" if request.url.path == "/healthz" else "livez")


async def ready(request: Request) -> Response:
    checks = {"ping": True, "storage": bool(getattr(request.app.state, "ready", False))}
    storage: interface.Store | None = getattr(request.app.state, "storage", None)
    if storage is not None and storage.health_check:
        checks[storage.health_check] = checks["storage"] and await _backend_ok(storage)
    reasons: dict[str, str] = {}
    more: Sequence[Check] = getattr(request.app.state, "checks", ())
    for check in more:
        why = check.failing()
        checks[check.name] = not why
        if why:
            reasons[check.name] = why
    return _check(request, checks, "readyz", reasons)


async def _backend_ok(storage: interface.Store) -> bool:
    """The backend's own probe (etcd: a linearizable read under the health-check deadline)."""
    try:
        async with asyncio.timeout(BACKEND_CHECK_LIMIT):
            await storage.check()
    except (interface.StorageError, TimeoutError):
        return False
    return True


async def version(request: Request) -> Response:
    return Response(orjson.dumps(version_info(request.headers.get("user-agent", ""))),
                    media_type="application/json")


def _check(request: Request, checks: dict[str, bool], name: str,
           reasons: dict[str, str] | None = None) -> Response:
    passed = all(checks.values())
    status = 200 if passed else 503
    if passed and not infos.served(request.scope).query.has("verbose"):
        return PlainTextResponse("ok", status_code=status)
    why = reasons or {}
    lines = [f"[+]{check} ok" if ok else
             f"[-]{check} failed" + (f": {why[check]}" if check in why else "")
             for check, ok in checks.items()]
    lines.append(f"{name} check {'passed' if passed else 'failed'}")
    return PlainTextResponse("\n".join(lines) + "\n", status_code=status)


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", alive, methods=["GET"]),
        Route("/livez", alive, methods=["GET"]),
        Route("/readyz", ready, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
    ]
