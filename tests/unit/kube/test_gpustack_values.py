"""``kube.gpustack``'s values: the specs the sources and a prefetch send, and what the helpers
read back from an artifact and a node store."""

from __future__ import annotations

import datetime

import pytest

from kube import errors, gpustack

DIGEST = "sha256:" + "ef" * 32


def test_sources_spell_the_schema() -> None:
    assert gpustack.HubSource("huggingFace", "org/m").spec() == {
        "huggingFace": {"repository": "org/m"}}
    assert gpustack.HubSource("modelScope", "org/m", "v1", "tok").spec() == {
        "modelScope": {"repository": "org/m", "revision": "v1", "secretRef": {"name": "tok"}}}
    assert gpustack.ClaimSource("weights", "qwen").spec() == {
        "persistentVolumeClaim": {"claimName": "weights", "path": "qwen"}}
    assert gpustack.ImageSource("r/m@sha256:" + "0" * 64).spec() == {
        "image": {"reference": "r/m@sha256:" + "0" * 64}}


def test_a_prefetch_spec() -> None:
    assert gpustack.PrefetchSpec("qwen", "grant", node_names=("node-a",)).spec() == {
        "artifactRef": {"name": "qwen"}, "bindingRef": {"name": "grant"},
        "placement": {"nodeSelector": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}},
        "retention": {"pinned": False}}
    assert gpustack.PrefetchSpec("qwen", "grant", match_labels={"gpu": "a100"}, min_ready=2,
                                 pinned=True, ttl_after_last_use="72h").spec() == {
        "artifactRef": {"name": "qwen"}, "bindingRef": {"name": "grant"},
        "placement": {"nodeSelector": {"matchLabels": {"gpu": "a100"}}}, "minReady": 2,
        "retention": {"pinned": True, "ttlAfterLastUse": "72h"}}
    assert "placement" not in gpustack.PrefetchSpec("qwen", "grant").spec()  # every store node


def test_an_artifact_read_back() -> None:
    found = gpustack.Artifact.of({
        "metadata": {"name": "qwen", "namespace": "team-a", "uid": "u1"},
        "status": {"resolved": {"revision": "c" * 40, "manifestDigest": DIGEST,
                                "sizeBytes": 7},
                   "conditions": [{"type": "Degraded", "status": "True"},
                                  {"type": "Resolved", "status": "True", "reason": "Resolved",
                                   "message": "ok"}]}})
    assert (found.resolved, found.reason, found.manifest_digest, found.size_bytes) == (
        True, "Resolved", DIGEST, 7)
    blank = gpustack.Artifact.of({"metadata": {"name": "new", "namespace": "team-a"}})
    assert (blank.resolved, blank.reason, blank.manifest_digest) == (False, "", "")
    late = gpustack.ResolutionTimeout(gpustack.Artifact.of({
        "metadata": {"name": "x", "namespace": "n"},
        "status": {"conditions": [{"type": "Resolved", "status": "False",
                                   "reason": "AccessDenied", "message": "401"}]}}), 3)
    assert isinstance(late, errors.KubeError)
    assert late.message == "n/x was not resolved within 3s (last: AccessDenied: 401)"


def test_a_node_store_read_back() -> None:
    store = gpustack.NodeStore.of({"metadata": {"name": "node-a"}, "status": {
        "capacity": {"totalBytes": 100, "storedBytes": 30, "usedPercent": 30},
        "conditions": [{"type": "Ready", "status": "True"},
                       {"type": "CapacityLow", "status": "False"}],
        "models": [{"digest": DIGEST, "state": "Downloading", "downloadedBytes": 3},
                   {"digest": "sha256:" + "0" * 64, "state": "Ready"}]}})
    assert (store.node, store.ready, store.total_bytes, store.used_percent) == (
        "node-a", True, 100, 30)
    assert not store.holds(DIGEST) and store.holds("sha256:" + "0" * 64)
    assert store.entry(DIGEST) == {"digest": DIGEST, "state": "Downloading",
                                   "downloadedBytes": 3}
    assert store.entry("sha256:" + "1" * 64) is None
    assert store.condition("CapacityLow") == {"type": "CapacityLow", "status": "False"}
    empty = gpustack.NodeStore.of({"metadata": {"name": "node-b"}})
    assert (empty.ready, empty.used_percent, empty.models, empty.condition("Ready")) == (
        False, None, (), None)


def test_a_terminal_failure_is_raised_with_its_reason_and_next_try() -> None:
    refused = gpustack.Artifact.of({
        "metadata": {"name": "x", "namespace": "n"},
        "status": {"retryTime": "2026-01-01T00:01:00Z", "conditions": [
            {"type": "Resolved", "status": "False", "reason": "RevisionNotFound",
             "message": "hf-mirror.example model org/x has no revision v9"}]}})
    failed = refused.failure()
    assert isinstance(failed, gpustack.ResolutionFailed) and isinstance(failed, errors.KubeError)
    assert failed.reason == "RevisionNotFound"
    assert failed.retry_time == datetime.datetime(2026, 1, 1, 0, 1, tzinfo=datetime.UTC)
    assert failed.message == ("n/x cannot be resolved: RevisionNotFound: hf-mirror.example model "
                              "org/x has no revision v9; the worker tries again at "
                              "2026-01-01T00:01:00Z")
    for reason in ("SourceUnavailable", "SecretNotFound", "Resolving"):  # may pass: waited for
        waiting = gpustack.Artifact.of({"metadata": {"name": "x"}, "status": {"conditions": [
            {"type": "Resolved", "status": "False", "reason": reason}]}})
        assert waiting.failure() is None and waiting.terminal_reason == ""


def test_copies_and_manifest_read_back() -> None:
    copies = gpustack.Copies.of({
        "kind": "ModelArtifactCopies", "apiVersion": "worker.gpustack.ai/v1",
        "metadata": {"name": "m", "namespace": "n"}, "manifestDigest": DIGEST, "sizeBytes": 10,
        "nodes": [{"node": "a", "phase": "Downloading", "downloadedBytes": 4, "live": True,
                   "sizeBytes": 10, "percent": 40, "source": "Hub", "prefetches": ["w"]},
                  {"node": "b", "phase": "Failed", "reason": "SourceUnavailable",
                   "retryTime": "2026-01-01T00:05:00Z"}]})
    a, b = copies.nodes
    assert (a.node, a.phase, a.downloaded_bytes, a.live, a.percent, a.prefetches) == (
        "a", "Downloading", 4, True, 40, ("w",))
    assert not a.ready and b.retry_time is not None and copies.node("b") is b
    assert copies.node("c") is None
    manifest = gpustack.Manifest.of({
        "kind": "ModelArtifactManifest", "apiVersion": "worker.gpustack.ai/v1",
        "manifestDigest": DIGEST, "files": [
            {"path": "m.gguf", "size": 3, "sha256": "a" * 64},
            {"path": "README.md", "size": 1, "gitBlobId": "b" * 40}]})
    assert [f.path for f in manifest.matching(".gguf")] == ["m.gguf"]
    assert manifest.files[1].git_blob_id == "b" * 40 and manifest.files[1].sha256 == ""
    with pytest.raises(errors.ServerError, match="ModelArtifactCopies"):
        gpustack.Copies.of({"kind": "Status", "apiVersion": "v1"})


def test_a_url_connection_needs_an_http_url() -> None:
    with pytest.raises(errors.ConfigError, match="http"):
        gpustack.ModelManager.from_url("cluster.example:6443", token="t")
