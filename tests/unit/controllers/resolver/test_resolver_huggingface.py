"""The resolver against the fixture hub's Hugging Face side: every row of the upstream operator's
answer table, annotated tags, paginated trees, patterns, private and gated repositories, the anchor,
and the listing cache."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devkit import fixturehub
from hub import files, listing
from openapi import manifest
from tests.unit.controllers.conftest import DAY, Harness

REPO = "org/model"
TOKEN = "hf_unit_secret_token_1"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"a": 1}\n',
    "model.safetensors": 3000,
    "tokenizer.json": b"{}",
    "original/consolidated.pth": 2000,
}


def hf(repo: str = REPO, revision: str | None = None, secret: str | None = None,
       **spec: Any) -> dict[str, Any]:
    member: dict[str, Any] = {"repository": repo}
    if revision is not None:
        member["revision"] = revision
    if secret is not None:
        member["secretRef"] = {"name": secret}
    return {"source": {"huggingFace": member}, **spec}


def expected_digest(hub: fixturehub.Hub, repo: str, keep: list[str] | None = None) -> str:
    """The digest computed independently from the fixture's own file table."""
    entries = []
    for path, remote in hub.repo(repo).files.items():
        if keep is not None and path not in keep:
            continue
        if remote.lfs:
            entries.append(manifest.Entry(path, "sha256", remote.sha256, remote.content.size))
        else:
            entries.append(manifest.Entry(path, "gitsha1", remote.content.gitsha1,
                                          remote.content.size))
    return manifest.digest(entries)


async def test_a_public_repository_resolves_with_every_field(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("m", hf())
    result = await harness.reconcile("m")
    status = await harness.status("m")
    resolved = status["resolved"]
    commit = harness.hub.repo(REPO).commit
    assert resolved["revision"] == commit
    assert resolved["manifestDigest"] == expected_digest(harness.hub, REPO)
    assert resolved["digestSource"] == "Hub"
    assert resolved["fileCount"] == 4 and resolved["sizeBytes"] == sum(
        harness.hub.content(REPO, p).size for p in FILES)
    assert resolved["resolvedTime"] == resolved["lastValidatedTime"] == "2026-01-01T00:00:00Z"
    assert await harness.condition("m") == ("True", "Resolved")
    assert await harness.condition("m", "Degraded") == ("False", "Healthy")
    assert status["observedGeneration"] == 1
    assert result.requeue_after == DAY
    assert harness.events.seen[-1][:2] == ("Normal", "Resolved")


async def test_the_first_write_says_resolving(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("m", hf())
    await harness.reconcile("m")
    seen = [{c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}["Resolved"]
            for status in harness.api.written]
    assert seen == [("Unknown", "Resolving"), ("True", "Resolved")]


async def test_an_annotated_tag_resolves_to_its_commit(harness: Harness) -> None:
    commit = "c" * 40
    harness.hub.add_repo(REPO, FILES, commit=commit, annotated_tags={"v1.0": commit})
    await harness.create("m", hf(revision="v1.0"))
    await harness.reconcile("m")
    assert (await harness.status("m"))["resolved"]["revision"] == commit


async def test_every_tree_page_is_listed(harness: Harness) -> None:
    many = {f"shard-{i:02d}.safetensors": 100 + i for i in range(9)}
    harness.hub.add_repo(REPO, many, tree_page_size=2)
    await harness.create("m", hf())
    await harness.reconcile("m")
    assert (await harness.status("m"))["resolved"]["fileCount"] == 9
    assert harness.hub.requests(f"/api/models/{REPO}/tree/{harness.hub.repo(REPO).commit}") == 5


async def test_patterns_select_the_files_and_an_empty_selection_refuses(
        harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("some", hf(allowPatterns=["*.json", "*.safetensors"],
                                    ignorePatterns=["tokenizer*"]))
    await harness.reconcile("some")
    resolved = (await harness.status("some"))["resolved"]
    assert resolved["fileCount"] == 2
    assert resolved["manifestDigest"] == expected_digest(
        harness.hub, REPO, ["config.json", "model.safetensors"])
    await harness.create("sub", hf(ignorePatterns=["original/"]))
    await harness.reconcile("sub")
    assert (await harness.status("sub"))["resolved"]["fileCount"] == 3
    await harness.create("none", hf(allowPatterns=["*.gguf"]))
    await harness.reconcile("none")
    assert await harness.condition("none") == ("False", "EmptyManifest")


async def test_revision_not_found(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("m", hf(revision="no-such-branch"))
    result = await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "RevisionNotFound")
    assert await harness.condition("m", "Degraded") == ("True", "RevisionNotFound")
    assert result.requeue_after == 60.0
    assert harness.events.seen[-1][:2] == ("Warning", "RevisionNotFound")


@pytest.mark.parametrize("case", ["missing", "private-anonymous", "private-wrong-token",
                                  "401", "403", "gated-masked"])
async def test_access_refusals(harness: Harness, case: str) -> None:
    repo = REPO
    if case.startswith("private"):
        harness.hub.add_repo(repo, FILES, private_token=TOKEN)
    elif case == "gated-masked":
        harness.hub.add_repo(repo, FILES, gated=True, private_token=TOKEN)
    elif case != "missing":
        harness.hub.add_repo(repo, FILES)
        harness.hub.faults(repo).fail_times = 1
        harness.hub.faults(repo).fail_status = int(case)
    secret = None
    if case == "private-wrong-token":
        harness.secret("hf", "hf_wrong_token_0")
        secret = "hf"
    await harness.create("m", hf(repo, secret=secret))
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "AccessDenied")
    message = json.dumps(await harness.status("m"))
    assert repo in message
    if case != "gated-masked":
        assert "does not exist or is not accessible" in message
    assert TOKEN not in message and "hf_wrong_token_0" not in message


async def test_a_private_repository_needs_the_namespace_token(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES, private_token=TOKEN)
    await harness.create("anonymous", hf())
    await harness.reconcile("anonymous")
    assert await harness.condition("anonymous") == ("False", "AccessDenied")
    harness.secret("hf", TOKEN)
    await harness.create("with-token", hf(secret="hf"))
    await harness.reconcile("with-token")
    assert await harness.condition("with-token") == ("True", "Resolved")
    # the token went to the hub, and nowhere into the status
    assert f"Bearer {TOKEN}" in harness.hub.authorizations(harness.hub.hub_netloc)
    assert TOKEN not in json.dumps(await harness.stored("with-token"))


@pytest.mark.parametrize(("status", "retry_after"), [(503, None), (500, None), (429, 120)])
async def test_outages_are_source_unavailable_and_retried(harness: Harness, status: int,
                                                          retry_after: int | None) -> None:
    harness.hub.add_repo(REPO, FILES)
    faults = harness.hub.faults(REPO)
    if status == 429:
        faults.rate_limit_times, faults.retry_after = 1, 120
    else:
        faults.fail_times, faults.fail_status = 1, status
    await harness.create("m", hf())
    result = await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "SourceUnavailable")
    assert await harness.condition("m", "Degraded") == ("True", "SourceUnavailable")
    assert result.requeue_after == (retry_after or 60.0)
    early = await harness.reconcile("m")  # woken early (say, by its own write): not due yet
    assert early.requeue_after is not None and early.requeue_after > 0
    harness.clock.advance(result.requeue_after)
    await harness.reconcile("m")
    assert await harness.condition("m") == ("True", "Resolved")


async def test_a_pass_again_writes_only_its_verdict(harness: Harness) -> None:
    """The note before a pass ("Resolving") is written only while there is no verdict; a pass
    after an outage writes its verdict once, and keeps retryTime in step with the retry."""
    harness.hub.add_repo(REPO, FILES)
    harness.hub.faults(REPO).fail_times, harness.hub.faults(REPO).fail_status = 2, 503
    await harness.create("m", hf())
    first = await harness.reconcile("m")
    assert "retryTime" in await harness.status("m")
    written = len(harness.api.written)
    assert first.requeue_after is not None
    harness.clock.advance(first.requeue_after)
    await harness.reconcile("m")
    assert len(harness.api.written) == written + 1
    assert harness.api.written[-1]["retryTime"] != harness.api.written[written - 1]["retryTime"]
    harness.clock.advance(first.requeue_after)
    await harness.reconcile("m")
    assert await harness.condition("m") == ("True", "Resolved")
    assert "retryTime" not in await harness.status("m")


async def test_a_network_error_is_source_unavailable(hub: fixturehub.Hub, registry: Any,
                                                     tmp_path: Any) -> None:
    running = Harness(hub, registry, tmp_path, endpoint="http://127.0.0.1:9")
    await running.start()
    try:
        await running.create("m", hf())
        await running.reconcile("m")
        assert await running.condition("m") == ("False", "SourceUnavailable")
        assert "network error" in json.dumps(await running.status("m"))
    finally:
        await running.close()


async def test_a_gated_repository_without_grant_is_refused_from_the_cache(
        harness: Harness) -> None:
    """The first artifact lists with the granted token; the second (no token) is served the
    cached listing, so its own access is proven by the HEAD, which the Hub refuses."""
    harness.hub.add_repo(REPO, FILES, gated=True, private_token=TOKEN)
    harness.secret("hf", TOKEN)
    await harness.create("granted", hf(secret="hf"))
    await harness.reconcile("granted")
    assert await harness.condition("granted") == ("True", "Resolved")
    await harness.create("anonymous", hf())
    await harness.reconcile("anonymous")
    assert await harness.condition("anonymous") == ("False", "AccessDenied")


async def test_a_second_artifact_at_a_listed_commit_costs_two_requests(
        harness: Harness) -> None:
    harness.hub.add_repo(REPO, {f"f{i}.bin": 10 + i for i in range(30)}, tree_page_size=5)
    await harness.create("first", hf())
    await harness.reconcile("first")
    harness.hub.reset_counters()
    await harness.create("second", hf(allowPatterns=["f1*"]))
    await harness.reconcile("second")
    assert await harness.condition("second") == ("True", "Resolved")
    assert harness.hub.total_requests() == 2  # the revision and one HEAD


async def test_expected_digest_is_checked(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    right = expected_digest(harness.hub, REPO)
    wrong = "sha256:" + "0" * 64
    await harness.create("right", hf(expectedDigest=right))
    await harness.reconcile("right")
    assert (await harness.status("right"))["resolved"]["manifestDigest"] == right
    await harness.create("wrong", hf(expectedDigest=wrong))
    await harness.reconcile("wrong")
    assert await harness.condition("wrong") == ("False", "DigestMismatch")
    message = json.dumps(await harness.status("wrong"))
    assert right in message and wrong in message


async def test_the_anchor_takes_over_after_two_outages_a_minute_apart(
        harness: Harness) -> None:
    """With an administrator's grant (test_resolver_anchors.py: the proofs, and without one)."""
    anchor = "sha256:" + "7" * 64
    harness.hub.add_repo(REPO, FILES)
    harness.hub.faults(REPO).fail_times = 1000
    await harness.create("m", hf(expectedDigest=anchor),
                         annotations={"worker.gpustack.ai/anchor-grant": "legacy import"})
    first = await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "SourceUnavailable")
    assert first.requeue_after == 60.0
    harness.clock.advance(30)  # a pass half a minute later is not the second of the rule
    harness.resolver.secret_changed("a", "nothing")  # (no Secret: nothing forced)
    harness.resolver._forced.add((await harness.stored("m"))["metadata"]["uid"])
    early = await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "SourceUnavailable")
    assert early.requeue_after == 30.0
    harness.clock.advance(30)
    second = await harness.reconcile("m")
    assert second.requeue_after is None
    resolved = (await harness.status("m"))["resolved"]
    assert resolved == {"manifestDigest": anchor, "digestSource": "Expected",
                        "anchorProof": "Grant", "resolvedTime": "2026-01-01T00:01:00Z"}
    assert await harness.condition("m") == ("True", "Resolved")
    harness.hub.reset_counters()
    harness.clock.advance(10 * DAY)
    await harness.reconcile("m")
    assert harness.hub.total_requests() == 0  # never contacted again


async def test_a_refusal_is_never_anchored_around(harness: Harness) -> None:
    anchor = "sha256:" + "7" * 64
    await harness.create("m", hf("org/absent", expectedDigest=anchor))
    await harness.reconcile("m")
    harness.clock.advance(3600)
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "AccessDenied")
    assert "digestSource" not in (await harness.status("m")).get("resolved", {})


async def test_an_unusable_path_is_an_unsupported_source(harness: Harness) -> None:
    harness.hub.add_repo(REPO, {"ok.json": b"{}", "bad\x01name": b"x"})
    await harness.create("m", hf())
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "UnsupportedSource")


def test_listing_build_is_the_one_used() -> None:
    """The resolver's digest is ``hub.listing.build``'s (so resolver and plugin agree)."""
    listed = [files.RemoteFile("a", 1, "sha256", "a" * 64, True)]
    assert listing.build(listed, (), ())[2] == manifest.digest([files.to_entry(listed[0])])
