"""``kubectlmodel.progress.Command``: the watch loops over a scripted series of answers (a
stand-in for ``gpustack.ModelManager``): a line or a JSON document per change, a transient
failure waited through, a refusal ending the command, and a fresh start when the artifact turns
out another object or an older state (the server's store went back)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

import kube
from kube import gpustack
from kubectlmodel import progress

DIGEST = "sha256:" + "12" * 32
MIB = 1 << 20


class Scripted:
    """Answers ``get_artifact``/``progress``/``copies``/``node_stores`` from a list of steps
    (``copies`` refused unless ``with_copies``: the node stores' path)."""

    def __init__(self, steps: list[dict[str, Any] | Exception], *,
                 with_copies: bool = False) -> None:
        self.steps: Iterator[dict[str, Any] | Exception] = iter(steps)
        self.current: dict[str, Any] = {}
        self.with_copies = with_copies

    async def copies(self, namespace: str, name: str) -> gpustack.Copies:
        if not self.with_copies:
            raise kube.Forbidden(403, "Forbidden", "cannot get modelartifacts/copies")
        have = self.current["have"]
        live = self.current.get("live", have)
        state = "Ready" if have >= 4 * MIB else "Downloading"
        return gpustack.Copies.of({
            "kind": "ModelArtifactCopies", "apiVersion": "worker.gpustack.ai/v1",
            "metadata": {"name": name, "namespace": namespace}, "manifestDigest": DIGEST,
            "sizeBytes": 4 * MIB, "nodes": [
                {"node": "node-a", "phase": state, "downloadedBytes": live,
                 "live": state == "Downloading", "sizeBytes": 4 * MIB},
                {"node": "node-b", "phase": "Pending", "downloadedBytes": 0,
                 "reason": "NoNodeStore", "message": "no plugin runs there"}]})

    async def get_artifact(self, namespace: str, name: str) -> gpustack.Artifact:
        step = next(self.steps)
        if isinstance(step, Exception):
            raise step
        self.current = step
        return gpustack.Artifact.of({
            "metadata": {"name": name, "namespace": namespace, "uid": step.get("uid", "u1"),
                         "resourceVersion": str(step.get("rv", 1))},
            "spec": {"source": {"huggingFace": {"repository": "org/m"}}},
            "status": step.get("status") or {
                "resolved": {"manifestDigest": DIGEST, "sizeBytes": 4 * MIB},
                "conditions": [{"type": "Resolved", "status": "True"}]}})

    async def progress(self, namespace: str, name: str) -> dict[str, Any]:
        have = self.current["have"]
        done = have >= 4 * MIB
        return {"kind": "ModelArtifactProgress", "timestamp": str(have),
                "manifestDigest": DIGEST, "sizeBytes": 4 * MIB, "ready": int(done),
                "downloading": int(not done), "failed": 0,
                "downloadingBytes": 0 if done else have, "failureReasons": []}

    async def node_stores(self) -> list[gpustack.NodeStore]:
        have = self.current["have"]
        state = "Ready" if have >= 4 * MIB else "Downloading"
        return [gpustack.NodeStore.of({"metadata": {"name": "node-a"}, "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "models": [{"digest": DIGEST, "state": state, "sizeBytes": 4 * MIB,
                        "downloadedBytes": have}]}})]


def command(steps: list[dict[str, Any] | Exception], *,
            with_copies: bool = False) -> tuple[progress.Command, io.StringIO]:
    out = io.StringIO()
    ticks = iter(float(n) for n in range(100))
    console = Console(file=io.StringIO(), force_terminal=False)
    models = Scripted(steps, with_copies=with_copies)
    return progress.Command(models, "team-a", "m", console=console,  # type: ignore[arg-type]
                            out=out, interval=0, monotonic=lambda: next(ticks)), out


async def test_lines_follow_the_download_and_stop_when_ready(
        capsys: pytest.CaptureFixture[str]) -> None:
    cmd, out = command([{"have": MIB // 2}, {"have": MIB},
                        kube.ServerError(503, "ServiceUnavailable", "not listed yet"),
                        {"have": 3 * MIB}, {"have": 4 * MIB}, {"have": 4 * MIB}])
    assert await cmd.lines(watch=True) == 0
    lines = out.getvalue().splitlines()
    assert [line.split("  ")[1] for line in lines] == [
        "Resolved -, sha256:121212121212, 4.0MiB", "node-a", "total", "node-a", "total",
        "node-a", "total", "node-a", "total"]
    assert lines[3] == "m  node-a  Downloading  1.0MiB/4.0MiB  25%  -  eta -"
    # from 1 MiB at tick 1 to 3 MiB at tick 3 (the failed look took tick 2)
    assert lines[5] == "m  node-a  Downloading  3.0MiB/4.0MiB  75%  1.0MiB/s  eta 1s"
    assert lines[7] == "m  node-a  Ready  4.0MiB/4.0MiB  100%"
    assert capsys.readouterr().err == "retrying: 503 ServiceUnavailable: not listed yet\n"


@pytest.mark.parametrize("after", [{"uid": "u2", "rv": 7},   # deleted and created again
                                   {"uid": "u1", "rv": 7}])  # an older copy of the same one
async def test_an_artifact_from_a_store_that_went_back_starts_the_view_over(
        after: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    too_large = kube.TooLargeResourceVersion(
        504, "Timeout", "Timeout: Too large resource version: 110, current: 6")
    cmd, out = command([{"have": MIB, "rv": 100}, {"have": 2 * MIB, "rv": 110}, too_large,
                        {"have": 3 * MIB, **after}, {"have": 4 * MIB, **after},
                        {"have": 4 * MIB, **after}])
    assert await cmd.lines(watch=True) == 0
    assert cmd.restarts == 1
    lines = out.getvalue().splitlines()
    # everything is printed again from the first look at the new state, and no rate spans the
    # two: 3 MiB is that state's first count (with the old one's, 0.5 MiB/s would show)
    assert [line.split("  ")[1] for line in lines].count(
        "Resolved -, sha256:121212121212, 4.0MiB") == 2
    assert "m  node-a  Downloading  3.0MiB/4.0MiB  75%  -  eta -" in lines
    assert "retrying: 504 Timeout" in capsys.readouterr().err


async def test_json_prints_each_changed_object() -> None:
    cmd, out = command([{"have": MIB}, {"have": MIB}, {"have": 4 * MIB}])
    assert await cmd.json(watch=True) == 0
    documents = [json.loads(part) for part in out.getvalue().replace("}\n{", "}\n\x00{")
                 .split("\x00")]
    assert [d["downloadingBytes"] for d in documents] == [MIB, 0]


async def test_one_look_does_not_wait_through_a_failure() -> None:
    cmd, _ = command([kube.ConnectionFailed(0, "ConnectionFailed", "refused")])
    with pytest.raises(kube.ConnectionFailed):
        await cmd.lines(watch=False)


async def test_a_refusal_ends_the_watch() -> None:
    cmd, _ = command([{"have": MIB}, kube.Forbidden(403, "Forbidden", "no")])
    with pytest.raises(kube.Forbidden):
        await cmd.lines(watch=True)
    untrusted, _ = command([kube.TLSError(0, "TLSError", "certificate verify failed")])
    with pytest.raises(kube.TLSError):
        await untrusted.lines(watch=True)


async def test_node_rows_come_from_copies_with_the_live_bytes_the_total_counts() -> None:
    # the node store would say 1 MiB (its stored report); copies say 3 MiB, read live, as the
    # total does: the row and the total agree
    cmd, out = command([{"have": MIB, "live": 3 * MIB}, {"have": 4 * MIB}], with_copies=True)
    assert await cmd.lines(watch=True) == 0
    lines = out.getvalue().splitlines()
    assert "m  node-a  Downloading  3.0MiB/4.0MiB  75%  -  eta -" in lines
    assert any(line.startswith("m  node-b  Pending  0B/4.0MiB") for line in lines)
    assert "m  node-a  Ready  4.0MiB/4.0MiB  100%" in lines


async def test_a_terminal_failure_ends_the_watch_with_its_reason() -> None:
    refused = {"have": 0, "status": {"retryTime": "2026-01-01T00:01:00Z", "conditions": [
        {"type": "Resolved", "status": "False", "reason": "AccessDenied",
         "message": "hub.example model org/m does not exist or is not accessible"}]}}
    cmd, _ = command([refused])
    with pytest.raises(gpustack.ResolutionFailed) as failed:
        await cmd.lines(watch=True)
    assert failed.value.reason == "AccessDenied" and "hub.example" in failed.value.message
    outage = {"have": 0, "status": {"conditions": [
        {"type": "Resolved", "status": "False", "reason": "SourceUnavailable"}]}}
    waited, _ = command([outage, {"have": 4 * MIB}, {"have": 4 * MIB}])
    assert await waited.lines(watch=True) == 0  # an outage may pass: waited through
