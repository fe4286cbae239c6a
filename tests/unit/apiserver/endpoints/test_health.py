"""Health endpoints and /version."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette

from apiserver.endpoints import health


def _client(ready: bool) -> httpx.AsyncClient:
    application = Starlette(routes=health.routes())
    application.state.ready = ready
    return httpx.AsyncClient(transport=httpx.ASGITransport(application), base_url="https://t")


async def test_live_and_healthy_regardless_of_readiness() -> None:
    async with _client(ready=False) as client:
        for path in ("/healthz", "/livez"):
            response = await client.get(path)
            assert response.status_code == 200
            assert response.text == "ok"


async def test_readyz_follows_state() -> None:
    async with _client(ready=False) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    async with _client(ready=True) as client:
        response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.text == "ok"


async def test_readyz_verbose_lists_checks() -> None:
    async with _client(ready=False) as client:
        response = await client.get("/readyz?verbose")
    assert "[+]ping ok" in response.text
    assert "[-]storage failed" in response.text
    assert response.text.endswith("readyz check failed\n")


class Identity:
    name = "worker-identity"

    def __init__(self, why: str) -> None:
        self.why = why

    def failing(self) -> str:
        return self.why


async def test_a_failing_check_names_why_without_verbose() -> None:
    application = Starlette(routes=health.routes())
    application.state.ready = True
    check = Identity("the SelfSubjectReview failed: kube-apiserver answered 503")
    application.state.checks = (check,)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(application),
                                 base_url="https://t") as client:
        failed = await client.get("/readyz")
        check.why = ""
        passed = await client.get("/readyz")
        verbose = await client.get("/readyz?verbose")
    assert failed.status_code == 503
    assert failed.text == ("[+]ping ok\n[+]storage ok\n[-]worker-identity failed: the "
                           "SelfSubjectReview failed: kube-apiserver answered 503\n"
                           "readyz check failed\n")
    assert (passed.status_code, passed.text) == (200, "ok")
    assert "[+]worker-identity ok" in verbose.text


async def test_version_shape() -> None:
    async with _client(ready=True) as client:
        body = (await client.get("/version")).json()
    assert set(body) == {
        "major", "minor", "gitVersion", "gitCommit", "gitTreeState",
        "buildDate", "goVersion", "compiler", "platform",
    }  # fmt: skip
    assert body["gitVersion"].startswith(f"v{body['major']}.{body['minor']}.")
    assert body["platform"].startswith("linux/")


async def test_version_names_the_project_and_the_clients_minor() -> None:
    async with _client(ready=True) as client:
        for agent, minor in (("kubectl/v1.27.16 (linux/amd64) kubernetes/cbb86e0", "27"),
                             ("kubectl/v1.33.1 (linux/amd64) kubernetes/8adc0f0", "33"),
                             ("controller/v1.30.0 (linux/amd64) kubernetes/abc", "30"),
                             ("python-httpx/0.28", str(health.DEFAULT_MINOR)), ("", "33")):
            body = (await client.get("/version", headers={"User-Agent": agent})).json()
            assert (body["major"], body["minor"]) == ("1", minor)
            assert body["gitVersion"] == f"v1.{minor}.0+model-manager-{health.project_version()}"
