"""What the resolver leaves for the GPUStack server beside the verdict: the manifest it resolved
(kept once per digest, served by ``modelartifacts/{name}/manifest`` only when it matches the
digest) and ``status.retryTime`` with a terminal reason, so a waiting client stops at once."""

from __future__ import annotations

import zlib

from apiserver.registry import manifests
from openapi import manifest
from openapi.kinds import manifest as view
from openapi.kinds import modelartifact
from tests.unit.controllers.conftest import Harness
from tests.unit.controllers.resolver.test_resolver_huggingface import REPO, expected_digest, hf

FILES: dict[str, bytes | int] = {
    "README.md": b"# gguf\n",
    "model-Q4_K_M.gguf": 3000,
    "model-Q8_0.gguf": 5000,
    "mmproj-model-f16.gguf": 700,
}
PATTERNS = ["*Q4_K_M*.gguf", "*mmproj*.gguf"]


async def test_the_manifest_names_the_files_the_patterns_kept(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("gguf", hf(allowPatterns=PATTERNS))
    await harness.reconcile("gguf")
    artifact = await harness.registry.modelartifacts.get("a", "gguf")
    digest = modelartifact.manifest_digest(artifact)
    assert digest == expected_digest(harness.hub, REPO,
                                     ["model-Q4_K_M.gguf", "mmproj-model-f16.gguf"])
    body = await harness.registry.manifest("a", "gguf")
    assert body["kind"] == "ModelArtifactManifest" and view.manifest_digest(body) == digest
    assert view.reason(body) == ""
    found = {view.file_path(f): f for f in view.files(body)}
    assert list(found) == ["mmproj-model-f16.gguf", "model-Q4_K_M.gguf"]
    remote = harness.hub.repo(REPO).files["model-Q4_K_M.gguf"]
    assert view.file_size(found["model-Q4_K_M.gguf"]) == 3000
    assert view.file_sha256(found["model-Q4_K_M.gguf"]) == remote.sha256  # an LFS file
    assert body["fileCount"] == 2 and body["sizeBytes"] == 3700


async def test_a_small_file_carries_its_git_blob_id(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("readme", hf(allowPatterns=["README.md"]))
    await harness.reconcile("readme")
    (only,) = view.files(await harness.registry.manifest("a", "readme"))
    assert view.file_git_blob_id(only) == harness.hub.repo(REPO).files["README.md"].content.gitsha1
    assert view.file_sha256(only) == ""


async def test_a_stored_manifest_that_does_not_match_is_never_served(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("gguf", hf(allowPatterns=PATTERNS))
    await harness.reconcile("gguf")
    digest = modelartifact.manifest_digest(await harness.registry.modelartifacts.get("a", "gguf"))
    record = await harness.registry.storage.get(manifests.key(digest))
    assert record is not None
    other = manifest.canonical_bytes([manifest.Entry("evil.gguf", "sha256", "0" * 64, 1)])
    await harness.registry.storage.update(record.key, zlib.compress(other),
                                          expected_revision=record.revision)
    body = await harness.registry.manifest("a", "gguf")
    assert view.files(body) == [] and view.reason(body) == manifests.MISMATCH


async def test_nothing_to_list_says_why(harness: Harness) -> None:
    await harness.create("later", hf())  # never reconciled: not resolved
    body = await harness.registry.manifest("a", "later")
    assert view.files(body) == [] and view.reason(body) == modelartifact.NOT_RESOLVED


async def test_a_refusal_is_terminal_with_its_next_attempt(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("m", hf(revision="no-such-branch"))
    result = await harness.reconcile("m")
    artifact = await harness.registry.modelartifacts.get("a", "m")
    assert modelartifact.terminal_reason(artifact) == "RevisionNotFound"
    assert result.requeue_after == 60.0
    assert modelartifact.retry_time(artifact) == "2026-01-01T00:01:00Z"  # now + the backoff


async def test_an_outage_is_not_terminal_and_success_clears_the_retry_time(
        harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    harness.hub.faults(REPO).fail_times = 1
    harness.hub.faults(REPO).fail_status = 503
    await harness.create("m", hf())
    await harness.reconcile("m")
    artifact = await harness.registry.modelartifacts.get("a", "m")
    assert modelartifact.terminal_reason(artifact) == ""
    assert modelartifact.retry_time(artifact)  # it says when it tries again
    harness.clock.advance(60)
    await harness.reconcile("m")
    artifact = await harness.registry.modelartifacts.get("a", "m")
    assert modelartifact.is_resolved(artifact) and modelartifact.retry_time(artifact) == ""
