"""The worker identity, learned again until learned: the real API server in cluster mode with
its embedded controllers, while the fixture control plane's SelfSubjectReview answers 503.
``/readyz`` fails naming why and each failed attempt is logged and counted; once the review
answers again the controllers start by themselves (an artifact created meanwhile resolves),
with nothing restarted. The same for ``python -m controllers`` against a server that is not
up yet: its ``/readyz`` names why, and it starts once the server answers."""

from __future__ import annotations

import asyncio
import pathlib
import re
import ssl
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx
import orjson
import pytest

from devkit import fixturehub
from devkit.controlplane import ControlPlane, Rule
from devkit.harness import aggregator, apiserver, clustermode
from tests.integration.apiserver import cluster
from tests.integration.controllers import test_external as external
from tests.support import kubectl

G = cluster.G
SSR = "POST /apis/authentication.k8s.io/v1/selfsubjectreviews"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {"config.json": b"{}", "w.bin": 64}
FAILURES = re.compile(r"^gpustack_model_manager_worker_identity_failures_total (\S+)$", re.M)
T = TypeVar("T")


async def _until(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], *,
                 guard: float = 60.0) -> T:
    """The first value of ``await read()`` that is ``ok`` (``guard`` against a hang)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard
    while not ok(seen := await read()):
        if loop.time() > deadline:
            raise AssertionError(f"still {seen!r} after the {guard}s guard")
        await asyncio.sleep(0.05)
    return seen


def _grant_controllers(cp: ControlPlane) -> None:
    """What the embedded controllers read and write in the cluster."""
    cp.policy.grant(clustermode.WORKER.name, [
        Rule(("get", "list", "watch"), ("",),
             ("secrets", "persistentvolumeclaims", "configmaps", "pods")),
        Rule(("list", "watch"), ("",), ("nodes",)),
        Rule(("list", "watch"), ("apps",), ("daemonsets",)),  # the warm-up Pods' tolerations
        Rule(("list", "watch"), ("storage.k8s.io",), ("csinodes",)),
        Rule(("get", "create", "update"), ("coordination.k8s.io",), ("leases",)),
        Rule(("create",), ("",), ("events",))])  # fmt: skip


def _readyz(server: clustermode.ClusterServer) -> httpx.Response | None:
    """The server's ``/readyz`` (anyone may ask), or None while it does not listen yet."""
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    try:
        with httpx.Client(verify=context, timeout=5.0) as client:
            return client.get(f"{server.url}/readyz")
    except httpx.TransportError:
        return None


def _failures(text: str) -> float:
    found = FAILURES.search(text)
    return float(found.group(1)) if found else -1.0


async def _status(server: clustermode.ClusterServer, name: str) -> dict[str, Any]:
    async with server.aggregator() as agg:
        found = await agg.get(f"{G}/namespaces/team-a/modelartifacts/{name}", aggregator.ADMIN)
    status: dict[str, Any] = found.json().get("status") or {}
    return status


def _resolved(status: dict[str, Any]) -> bool:
    return any(c["type"] == "Resolved" and c["status"] == "True"
               for c in status.get("conditions", []))


async def test_a_failing_self_subject_review_is_retried_until_the_controllers_start(
        tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp", namespaces=("gpustack-system", "team-a")) as cp, \
            fixturehub.run() as hub:
        clustermode.prepare(cp)
        cluster.grant_chart_and_tenants(cp)
        _grant_controllers(cp)
        hub.add_repo("org/m", FILES)
        with cp.fail(SSR, 503):
            server = clustermode.start(cp, tmp_path / "server", wait_ready=False, extra_args=[
                "--controllers=embedded", "--huggingface-endpoint", hub.endpoint])
            try:
                # not ready, saying why; every failed attempt is counted and logged
                answer = await _until(lambda: asyncio.to_thread(_readyz, server),
                                      lambda r: r is not None)
                assert answer is not None and answer.status_code == 503
                assert "[-]worker-identity failed: the SelfSubjectReview failed: " \
                    "kube-apiserver answered 503" in answer.text
                assert "[+]storage ok" in answer.text
                async with server.aggregator() as agg:
                    created = await agg.request(
                        "POST", f"{G}/namespaces/team-a/modelartifacts", aggregator.ADMIN,
                        headers=[("Content-Type", "application/json")],
                        content=orjson.dumps(cluster.artifact(
                            "m", "team-a", {"huggingFace": {"repository": "org/m"}})))
                    assert created.status_code == 201, created.text

                    async def counted() -> float:
                        return _failures((await agg.get("/metrics", aggregator.ADMIN)).text)

                    await _until(counted, lambda n: n >= 2)
                assert len(re.findall(r"worker identity unknown \(attempt \d+; the "
                                      r"controllers wait\)", server.log())) >= 2
                assert (await _status(server, "m")) == {}  # no controller ran meanwhile
            except BaseException:
                server.stop()
                raise
        try:
            # the review answers again: the controllers start by themselves
            await _until(lambda: asyncio.to_thread(_readyz, server),
                         lambda r: r is not None and r.status_code == 200, guard=90)
            status = await _until(lambda: _status(server, "m"), _resolved, guard=90)
            assert status["resolved"]["revision"] == hub.repo("org/m").commit
            assert "worker identity learned after" in server.log()
            assert server.process.poll() is None  # nothing was restarted
        finally:
            server.stop()


def test_python_m_controllers_waits_for_its_identity(
        tmp_path: pathlib.Path, started: list[external.Controllers]) -> None:
    with fixturehub.run() as hub:
        hub.add_repo("org/m", FILES)
        first = apiserver.start(tmp_path / "api", extra_args=["--controllers=external"])
        port = int(first.url.rsplit(":", 1)[1])
        first.stop()  # its files (the worker's kubeconfig) stay: the server is down now
        (tmp_path / "secrets").mkdir()
        health = apiserver.free_port()
        worker = external.Controllers(tmp_path, "worker", [
            "--kubeconfig", str(first.worker_kubeconfig), "--secrets-dir",
            str(tmp_path / "secrets"), "--huggingface-endpoint", hub.endpoint,
            "--health-port", str(health), "--health-bind-address", "127.0.0.1"])
        started.append(worker)

        def readyz() -> httpx.Response | None:
            try:
                return httpx.get(f"http://127.0.0.1:{health}/readyz", timeout=5.0)
            except httpx.TransportError:
                return None

        answer = external._wait("the health port", readyz)
        assert answer.status_code == 503
        assert "[-]worker-identity failed: the SelfSubjectReview failed:" in answer.text
        external._wait("two failed attempts", lambda: len(re.findall(
            r"worker identity unknown \(attempt \d+;", worker.log())) >= 2)
        assert _failures(httpx.get(f"http://127.0.0.1:{health}/metrics").text) >= 2
        # the server comes up (same port, same files): the controllers start by themselves
        server = apiserver.start(tmp_path / "api", port=port,
                                 extra_args=["--controllers=external"])
        try:
            ctl = kubectl.Kubectl(server.kubeconfig, tmp_path / "cache")
            ctl.run("apply", "-f", "-", stdin=external._artifact("m", "org/m"))
            ctl.run("wait", "--for=condition=Resolved", "mart/m", "-n", "team-a",
                    "--timeout=90s")
            ready = external._wait("ready", lambda: (found := readyz()) is not None
                                   and found.status_code == 200 and found)
            assert ready.text == "ok"
            assert f"the controllers write as {_worker_name(server)}" in worker.log()
            worker.stop()
            assert worker.process.returncode == 0, worker.log()[-3000:]
        finally:
            server.stop()
            server.kill()


def _worker_name(server: apiserver.RunningServer) -> str:
    return next(user for user, token in apiserver.read_tokens(
        server.data_dir / "tokens.csv").items() if token == server.worker_token)


@pytest.fixture
def started() -> Iterator[list[external.Controllers]]:
    processes: list[external.Controllers] = []
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
