"""``kubectlmodel.render`` and ``kubectlmodel.snapshot``: the bars and lines drawn from one
snapshot, the rates between snapshots, and when a watch is done."""

from __future__ import annotations

import datetime
import io
from typing import Any

from rich.console import Console

from kube import gpustack
from kubectlmodel import render, snapshot

NOW = datetime.datetime(2026, 12, 4, 6, 0, tzinfo=datetime.UTC)
DIGEST = "sha256:" + "ab" * 32
MIB = 1 << 20


def artifact(*, resolved: bool = True, source: dict[str, Any] | None = None) -> gpustack.Artifact:
    status: dict[str, Any] = {"conditions": [{
        "type": "Resolved", "status": "True" if resolved else "Unknown",
        "reason": "Resolved" if resolved else "Resolving",
        "message": "resolved" if resolved else "asking the hub"}]}
    if resolved:
        status["resolved"] = {"revision": "c" * 40, "manifestDigest": DIGEST,
                              "sizeBytes": 4 * MIB}
    return gpustack.Artifact.of({
        "metadata": {"name": "qwen", "namespace": "team-a"},
        "spec": {"source": source or {"huggingFace": {"repository": "Qwen/Qwen2.5"}}},
        "status": status})


def progress(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "ModelArtifactProgress", "manifestDigest": DIGEST,
                            "sizeBytes": 4 * MIB, "ready": 0, "downloading": 1, "failed": 0,
                            "downloadingBytes": MIB, "failureReasons": []}
    body.update(fields)
    return body


def row(node: str = "node-a", state: str = "Downloading", have: int = MIB,
        **fields: Any) -> snapshot.NodeRow:
    return snapshot.NodeRow(node=node, state=state, size_bytes=4 * MIB, downloaded_bytes=have,
                            **fields)


def shot(nodes: tuple[snapshot.NodeRow, ...] | None = (), at: float = 0.0,
         **progress_fields: Any) -> snapshot.Snapshot:
    return snapshot.Snapshot(artifact(), progress(**progress_fields), nodes, at, NOW)


def text(renderable: Any) -> str:
    out = io.StringIO()
    Console(file=out, width=160, force_terminal=False, color_system=None).print(renderable)
    return out.getvalue()


def test_rates_time_the_changes_over_the_window() -> None:
    rates = snapshot.Rates(window=100, stale=30)
    # the first value seen is not a change: when it was reached is unknown
    assert rates.add("a", 0.0, 10, 100) == snapshot.Rate(None, None)
    assert rates.add("a", 5.0, 20, 100) == snapshot.Rate(None, None)
    assert rates.add("a", 10.0, 20, 100) == snapshot.Rate(None, None)
    # two changes 10 s apart: 2 bytes/s; the ETA counts down from the last change
    assert rates.add("a", 15.0, 40, 100) == snapshot.Rate(2.0, 30.0)
    assert rates.add("a", 20.0, 40, 100) == snapshot.Rate(2.0, 25.0)
    assert rates.add("a", 50.0, 40, 100) == snapshot.Rate(None, None)  # stood still too long
    # measured from the last change at least a window old: older ones drop out
    assert rates.add("a", 110.0, 100, 100) == snapshot.Rate((100 - 20) / (110 - 5), 0.0)
    assert rates.add("a", 120.0, 120, 200).bytes_per_second == (120 - 40) / (120 - 15)
    # a new attempt (fewer bytes) starts over
    assert rates.add("a", 121.0, 5, 100) == snapshot.Rate(None, None)
    rates.forget("a")
    assert rates.add("a", 122.0, 50, 100) == snapshot.Rate(None, None)


def test_done_when_ready_somewhere_and_nothing_downloads() -> None:
    assert not shot(ready=0, downloading=1).done
    assert not shot(ready=1, downloading=1).done
    assert not shot(ready=0, downloading=0).done
    assert shot(ready=1, downloading=0, failed=2).done
    claim = snapshot.Snapshot(artifact(source={"persistentVolumeClaim": {"claimName": "c"}}),
                              {"reason": "mounted from the claim"}, None, 0, NOW)
    assert claim.done
    unresolved = snapshot.Snapshot(artifact(resolved=False), {"reason": "not resolved"}, (), 0,
                                   NOW)
    assert not unresolved.done


def test_lines_per_node_and_total() -> None:
    failed = row("node-b", "Failed", 2 * MIB, reason="SourceUnavailable", message="hub 503",
                 retry_time=NOW + datetime.timedelta(minutes=3))
    taken = shot((row(), failed), failed=1, failureReasons=[
        {"reason": "SourceUnavailable", "count": 1}])
    found = [line.text for line in render.lines(taken, {})]
    assert found == [
        "qwen  Resolved cccccccccccc, sha256:abababababab, 4.0MiB",
        "qwen  node-a  Downloading  1.0MiB/4.0MiB  25%  -  eta -",
        "qwen  node-b  Failed  2.0MiB/4.0MiB  50%  SourceUnavailable; hub 503; retry in 3m",
        "qwen  total  0 ready, 1 downloading, 1 failed  1.0MiB/4.0MiB  25%  -  eta -  "
        "SourceUnavailable x1",
    ]


def test_a_line_changes_with_its_facts_not_with_its_rate() -> None:
    rates = snapshot.Rates()
    found = []
    for at, have in ((0, MIB // 2), (1, MIB), (2, 2 * MIB), (3, 2 * MIB)):
        taken = shot((row(have=have),), at=at, downloadingBytes=have)
        found.append(render.lines(taken, render.rates_for(taken, rates))[1])
    assert found[0].change != found[1].change != found[2].change == found[3].change
    assert found[1].text.endswith("1.0MiB/4.0MiB  25%  -  eta -")
    assert found[2].text.endswith("2.0MiB/4.0MiB  50%  1.0MiB/s  eta 2s")
    assert found[3].text.endswith("2.0MiB/4.0MiB  50%  1.0MiB/s  eta 1s")


def test_a_tenant_gets_the_total_only() -> None:
    found = [line.text for line in render.lines(shot(None), {})]
    assert len(found) == 2
    assert found[1].endswith("per node: not permitted to list nodemodelstores")
    drawn = text(render.frame(shot(None), {}))
    assert "node-" not in drawn and "per node: not permitted" in drawn


def test_the_frame_draws_a_bar_per_node_and_the_total() -> None:
    rates = {"node-a": snapshot.Rate(512 * 1024, 6.0)}
    drawn = text(render.frame(shot((row(), row("node-c", "Ready", 4 * MIB)), ready=1), rates))
    assert "team-a/qwen  Hugging Face Qwen/Qwen2.5@main  Resolved cccccccccccc" in drawn
    lines = {line.split()[0]: line for line in drawn.splitlines() if line.strip()}
    assert "━" in lines["node-a"] and "1.0MiB/4.0MiB 25%" in lines["node-a"]
    assert "512.0KiB/s" in lines["node-a"] and "6s" in lines["node-a"]
    assert "4.0MiB/4.0MiB 100%" in lines["node-c"]
    assert "1 ready" in lines["total"] and "1 downloading, 0 failed" in lines["total"]
    assert "5.0MiB/8.0MiB 62%" in lines["total"]


def test_an_unresolved_artifact_draws_its_reason_and_no_bar() -> None:
    taken = snapshot.Snapshot(artifact(resolved=False), {"reason": "not resolved"}, (), 0, NOW)
    drawn = text(render.frame(taken, {}))
    assert "not resolved: Resolving: asking the hub" in drawn and "━" not in drawn


def test_markup_in_a_message_is_printed_as_written() -> None:
    taken = shot((row("node-b", "Failed", 0, reason="AccessDenied", message="[bold]x[/]"),))
    assert "[bold]x[/]" in text(render.frame(taken, {}))


def test_node_row_of_a_store_entry() -> None:
    store = gpustack.NodeStore.of({"metadata": {"name": "node-a"}, "status": {
        "conditions": [{"type": "Ready", "status": "False"}],
        "models": [{"digest": DIGEST, "state": "Ready", "sizeBytes": 10,
                    "downloadedBytes": 3}]}})
    entry = store.entry(DIGEST)
    assert entry is not None
    found = snapshot.NodeRow.of(store, entry, 99)
    assert (found.state, found.downloaded_bytes, found.size_bytes, found.store_ready) == (
        "Ready", 10, 10, False)
    assert snapshot.parse_time("2026-12-04T06:00:00Z") == NOW
    assert snapshot.parse_time("yesterday") is None
