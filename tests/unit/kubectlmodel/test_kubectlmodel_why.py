"""``kubectlmodel.why``: the verdict and the chain of facts behind it, from one snapshot."""

from __future__ import annotations

import datetime
from typing import Any

from kube import gpustack
from kubectlmodel import snapshot, why

NOW = datetime.datetime(2026, 12, 4, 6, 0, tzinfo=datetime.UTC)
DIGEST = "sha256:" + "cd" * 32
MIB = 1 << 20


def artifact(resolved: str = "True", reason: str = "Resolved", message: str = "resolved",
             degraded: tuple[str, str] | None = ("False", "Healthy"),
             source: dict[str, Any] | None = None) -> gpustack.Artifact:
    conditions = [{"type": "Resolved", "status": resolved, "reason": reason,
                   "message": message, "lastTransitionTime": "2026-12-04T05:55:00Z"}]
    if degraded:
        conditions.append({"type": "Degraded", "status": degraded[0], "reason": degraded[1],
                           "message": "the last check succeeded"})
    status: dict[str, Any] = {"conditions": conditions}
    if resolved == "True" and source is None:
        status["resolved"] = {"manifestDigest": DIGEST, "sizeBytes": 2 * MIB}
    return gpustack.Artifact.of({
        "metadata": {"name": "qwen", "namespace": "team-a"},
        "spec": {"source": source or {"huggingFace": {"repository": "Qwen/Qwen2.5"}}},
        "status": status})


def taken(found: gpustack.Artifact, nodes: tuple[snapshot.NodeRow, ...] | None = (),
          **counts: Any) -> snapshot.Snapshot:
    body: dict[str, Any] = {"ready": 0, "downloading": 0, "failed": 0, "downloadingBytes": 0,
                            "failureReasons": []}
    if found.manifest_digest:
        body.update(manifestDigest=DIGEST, sizeBytes=2 * MIB)
    else:
        body["reason"] = "The artifact's files come from its PersistentVolumeClaim"
    body.update(counts)
    return snapshot.Snapshot(found, body, nodes, 0.0, NOW)


def test_not_resolved_names_the_reason_and_stops_at_the_conditions() -> None:
    shot = taken(artifact("False", "SecretNotFound", "Secret team-a/hf has no key token",
                          degraded=("True", "SecretNotFound")))
    assert why.verdict(shot) == "team-a/qwen is not ready: it is not resolved (SecretNotFound)."
    assert why.chain(shot) == [
        "Resolved=False SecretNotFound (for 5m): Secret team-a/hf has no key token",
        "Degraded=True SecretNotFound: the last check succeeded",
    ]


def test_a_new_artifact_has_no_conditions_yet() -> None:
    found = gpustack.Artifact.of({"metadata": {"name": "qwen", "namespace": "team-a"},
                                  "spec": {"source": {}}})
    shot = snapshot.Snapshot(found, {"reason": "not resolved"}, (), 0.0, NOW)
    assert why.verdict(shot) == "team-a/qwen is not ready: it is not resolved (Pending)."
    assert why.chain(shot)[0] == "Resolved: not reported yet (the worker has not looked at it)"


def test_nothing_fetched_yet() -> None:
    assert why.verdict(taken(artifact())) == (
        "team-a/qwen is not ready: no node holds or downloads it yet; a node fetches it when a"
        " Pod mounts it.")


def test_ready_on_some_and_failing_elsewhere() -> None:
    retry = NOW + datetime.timedelta(minutes=4)
    nodes = (snapshot.NodeRow("node-a", "Ready", 2 * MIB, 2 * MIB),
             snapshot.NodeRow("node-b", "Failed", 2 * MIB, 0, "InsufficientCapacity",
                              "needs 2.0MiB, 1.0MiB free", retry, store_ready=False))
    shot = taken(artifact(), nodes, ready=1, failed=1,
                 failureReasons=[{"reason": "InsufficientCapacity", "count": 1}])
    assert why.verdict(shot) == "team-a/qwen is ready on 1 node."
    assert why.chain(shot)[2:] == [
        "progress: 1 ready, 0 downloading, 1 failed, 2.0MiB of 2.0MiB",
        "  1 failed with InsufficientCapacity",
        "node node-a: Ready 2.0MiB/2.0MiB",
        "node node-b: Failed 0B/2.0MiB, InsufficientCapacity: needs 2.0MiB, 1.0MiB free; retry"
        " in 4m (at 2026-12-04T06:04:00Z); its node store is not Ready (the plugin may be down)",
    ]


def test_downloading_and_failed_with_the_mean() -> None:
    shot = taken(artifact(), None, ready=1, downloading=2, failed=1, downloadingPercent=40,
                 downloadingBytes=MIB)
    assert why.verdict(shot) == ("team-a/qwen is not ready everywhere: downloading on 2 nodes"
                                 " (40%), failed on 1 node, ready on 1 node.")
    assert why.chain(shot)[-1].startswith("nodes: not shown (you may not list")


def test_a_claim_is_ready_once_resolved() -> None:
    shot = taken(artifact(source={"persistentVolumeClaim": {"claimName": "weights"}}))
    assert why.verdict(shot) == ("team-a/qwen is ready: The artifact's files come from its "
                                 "PersistentVolumeClaim")


def test_the_exit_code_is_the_verdict() -> None:
    assert why.is_ready(taken(artifact(), None, ready=2))
    assert not why.is_ready(taken(artifact(), None, ready=1, downloading=1))
    assert not why.is_ready(taken(artifact(), None, ready=1, failed=1))
    assert not why.is_ready(taken(artifact(), None))  # resolved, but on no node yet
    assert not why.is_ready(taken(artifact("False", "AccessDenied", "no")))
    claim = artifact(source={"persistentVolumeClaim": {"claimName": "weights"}})
    assert why.is_ready(taken(claim))  # mounted whole from its volume: nothing to download


def test_a_terminal_failure_says_when_the_worker_tries_again() -> None:
    found = gpustack.Artifact.of({
        "metadata": {"name": "qwen", "namespace": "team-a"},
        "spec": {"source": {"huggingFace": {"repository": "org/missing"}}},
        "status": {"retryTime": "2026-12-04T06:02:00Z", "conditions": [
            {"type": "Resolved", "status": "False", "reason": "AccessDenied",
             "message": "hf-mirror.example model org/missing does not exist or is not "
                        "accessible"}]}})
    lines = why.chain(taken(found))
    assert "hf-mirror.example model org/missing" in lines[0]
    assert lines[-1] == ("this cannot be fixed by waiting; the worker's retry in 2m "
                         "(at 2026-12-04T06:02:00Z)")


def test_a_pending_target_says_why() -> None:
    rows = (snapshot.NodeRow("node-b", "Pending", 2 * MIB, 0, "NoNodeStore",
                             "no plugin runs on node-b"),)
    lines = why.chain(taken(artifact(), rows, downloading=0))
    assert lines[-1] == "node node-b: Pending 0B/2.0MiB, NoNodeStore: no plugin runs on node-b"
