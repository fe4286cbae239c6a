"""Two API servers on one etcd, each with embedded controllers: one leads (a Lease kept in the
shared store), the other serves the API and stays passive; kill -9 the leader and the other takes
over after the lease duration; every artifact is resolved exactly once."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devkit import fixturehub
from devkit.harness import apiserver as support
from devkit.harness import etcd
from tests.support import kubectl

FILES: dict[str, bytes | int | fixturehub.FileSpec] = {"config.json": b"{}", "w.safetensors": 2048}


def _artifact(name: str) -> str:
    return (f"apiVersion: worker.gpustack.ai/v1\nkind: ModelArtifact\nmetadata:\n"
            f"  name: {name}\n  namespace: team-a\nspec:\n  source:\n    huggingFace:\n"
            f"      repository: org/{name}\n")


def _wait(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)
    return found


@pytest.fixture
def member(tmp_path: pathlib.Path) -> Iterator[etcd.Etcd]:
    with etcd.running(tmp_path / "etcd") as running:
        yield running


def test_one_replica_resolves_and_the_other_takes_over(member: etcd.Etcd,
                                                       tmp_path: pathlib.Path) -> None:
    with fixturehub.run() as hub:
        for i in range(6):
            hub.add_repo(f"org/m{i}", FILES)
        args = support.etcd_args(
            member.url, "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
            "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
            "--leader-elect-retry-period", "500ms")
        shared = tmp_path / "shared"
        first = support.start(shared, extra_args=args, log_name="first.log")
        try:
            _wait("a leader", lambda: "acquired lease" in first.log())
            second = support.start(shared, extra_args=args, log_name="second.log")
            try:
                ctl = kubectl.Kubectl(second.kubeconfig, tmp_path / "cache")
                for i in range(3):  # created through the passive replica
                    ctl.run("apply", "-f", "-", stdin=_artifact(f"m{i}"))
                for i in range(3):
                    ctl.run("wait", "--for=condition=Resolved", f"mart/m{i}", "-n", "team-a",
                            "--timeout=60s")
                assert "acquired lease" not in second.log()  # passive, serving the API
                first.kill()
                for i in range(3, 6):
                    ctl.run("apply", "-f", "-", stdin=_artifact(f"m{i}"))
                _wait("the take-over", lambda: "acquired lease" in second.log())
                for i in range(3, 6):
                    ctl.run("wait", "--for=condition=Resolved", f"mart/m{i}", "-n", "team-a",
                            "--timeout=60s")
                for i in range(6):  # each resolved once, by one replica
                    assert hub.requests(f"/api/models/org/m{i}/revision/main") == 1, i
            finally:
                second.stop()
                second.kill()
        finally:
            first.kill()
