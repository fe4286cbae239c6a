"""Revalidation, driven by the manual clock (no sleeps): the one-file HEAD every interval, the
refusal staircase (Degraded, then Resolved=False a minute later, restored by a later success),
outages that only degrade, the Secret's removal and rotation, anchored artifacts re-listing,
the schedule surviving a restart, and the offline sources."""

from __future__ import annotations

import json
from typing import Any

from controllers.resolver import controller as resolver
from controllers.resolver import passes
from controllers.sources import claims
from tests.support import waiting
from tests.unit.controllers.conftest import DAY, Harness

REPO = "org/model"
TOKEN = "hf_reval_token_1"
NEW_TOKEN = "hf_reval_token_2"
FILES: dict[str, Any] = {"config.json": b"{}", "model.safetensors": 5000}


def hf(secret: str | None = "hf", **spec: Any) -> dict[str, Any]:
    member: dict[str, Any] = {"repository": REPO}
    if secret:
        member["secretRef"] = {"name": secret}
    return {"source": {"huggingFace": member}, **spec}


async def resolved_private(harness: Harness, **spec: Any) -> dict[str, Any]:
    harness.hub.add_repo(REPO, FILES, private_token=TOKEN)
    harness.secret("hf", TOKEN)
    await harness.create("m", hf(**spec))
    await harness.reconcile("m")
    assert await harness.condition("m") == ("True", "Resolved")
    resolved: dict[str, Any] = (await harness.status("m"))["resolved"]
    return resolved


async def test_nothing_happens_before_the_interval(harness: Harness) -> None:
    await resolved_private(harness)
    harness.hub.reset_counters()
    harness.clock.advance(DAY - 1)
    result = await harness.reconcile("m")
    assert result.requeue_after == 1.0 and harness.hub.total_requests() == 0


async def test_a_due_revalidation_is_one_head(harness: Harness) -> None:
    before = await resolved_private(harness)
    harness.hub.reset_counters()
    harness.clock.advance(DAY)
    result = await harness.reconcile("m")
    assert harness.hub.total_requests() == 1
    head = f"/api/models/{REPO}/resolve/{before['revision']}/config.json"
    assert harness.hub.requests(head) == 1
    after = (await harness.status("m"))["resolved"]
    assert after["lastValidatedTime"] == "2026-01-02T00:00:00Z"
    assert {k: v for k, v in after.items() if k != "lastValidatedTime"} == {
        k: v for k, v in before.items() if k != "lastValidatedTime"}
    assert result.requeue_after == DAY


async def test_the_refusal_staircase_and_the_recovery(harness: Harness) -> None:
    before = await resolved_private(harness)
    harness.hub.repo(REPO).private_token = "someone-else"  # access revoked
    harness.clock.advance(DAY)
    first = await harness.reconcile("m")
    assert await harness.condition("m", "Degraded") == ("True", "AccessDenied")
    assert await harness.condition("m") == ("True", "Resolved")  # one refusal is no verdict
    assert first.requeue_after == 60.0
    harness.clock.advance(60)
    second = await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "AccessDenied")
    assert "refused twice" in json.dumps(await harness.status("m"))
    harness.hub.repo(REPO).private_token = TOKEN  # access back
    assert second.requeue_after is not None
    harness.clock.advance(second.requeue_after)
    await harness.reconcile("m")
    assert await harness.condition("m") == ("True", "Resolved")
    assert await harness.condition("m", "Degraded") == ("False", "Healthy")
    after = (await harness.status("m"))["resolved"]
    assert (after["revision"], after["manifestDigest"]) == (before["revision"],
                                                            before["manifestDigest"])


async def test_an_outage_only_degrades(harness: Harness) -> None:
    await resolved_private(harness)
    harness.hub.faults(REPO).fail_times = 1000
    harness.clock.advance(DAY)
    for _ in range(5):
        result = await harness.reconcile("m")
        assert await harness.condition("m") == ("True", "Resolved")
        assert await harness.condition("m", "Degraded") == ("True", "SourceUnavailable")
        assert result.requeue_after == 60.0
        harness.clock.advance(60)
    harness.hub.clear_faults()
    await harness.reconcile("m")
    assert await harness.condition("m", "Degraded") == ("False", "Healthy")


async def test_a_deleted_secret_revokes_at_once(harness: Harness) -> None:
    await resolved_private(harness)
    harness.secret("hf", None)  # the watcher sees it: the artifact is checked now
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "SecretNotFound")


async def test_an_unreadable_secret_is_treated_as_an_outage(harness: Harness) -> None:
    await resolved_private(harness)
    harness.secret("hf", "bad token with spaces")
    await harness.reconcile("m")
    assert await harness.condition("m") == ("True", "Resolved")
    assert await harness.condition("m", "Degraded") == ("True", "SourceUnavailable")


async def test_a_secret_rotated_mid_way(harness: Harness) -> None:
    await resolved_private(harness)
    # the hub moves to a new token and so does the Secret: checked at once, with the new one
    harness.hub.repo(REPO).private_token = NEW_TOKEN
    harness.hub.reset_counters()
    harness.secret("hf", NEW_TOKEN)
    await harness.reconcile("m")
    assert harness.hub.authorizations(harness.hub.hub_netloc) == [f"Bearer {NEW_TOKEN}"]
    assert await harness.condition("m", "Degraded") == ("False", "Healthy")
    # rotated to a token the hub refuses: the staircase, from the Secret change on
    harness.secret("hf", "hf_not_valid_anywhere")
    await harness.reconcile("m")
    assert await harness.condition("m", "Degraded") == ("True", "AccessDenied")
    harness.clock.advance(60)
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "AccessDenied")
    stored = json.dumps(await harness.stored("m"))
    assert "hf_not_valid_anywhere" not in stored and NEW_TOKEN not in stored


async def test_an_anchored_artifact_re_lists_and_catches_changed_content(
        harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES, private_token=TOKEN)
    harness.secret("hf", TOKEN)
    await harness.create("probe", hf())
    await harness.reconcile("probe")
    digest = (await harness.status("probe"))["resolved"]["manifestDigest"]
    await harness.create("m", hf(expectedDigest=digest))
    await harness.reconcile("m")
    commit = harness.hub.repo(REPO).commit
    harness.hub.reset_counters()
    harness.clock.advance(DAY)
    await harness.reconcile("m")
    assert harness.hub.requests(f"/api/models/{REPO}/tree/{commit}") == 1
    assert await harness.condition("m", "Degraded") == ("False", "Healthy")
    # the mirror now serves other bytes at the pinned commit
    harness.hub.add_repo(REPO, {**FILES, "extra.bin": 3}, private_token=TOKEN, commit=commit)
    harness.clock.advance(DAY)
    await harness.reconcile("m")
    assert await harness.condition("m", "Degraded") == ("True", "DigestMismatch")
    harness.clock.advance(60)
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "DigestMismatch")
    assert digest in json.dumps(await harness.status("m"))


async def test_a_restarted_resolver_keeps_the_schedule(harness: Harness) -> None:
    await resolved_private(harness)
    harness.clock.advance(3600)
    fresh = resolver.Resolver(
        harness.api, harness.informer, passes.Passes(harness.hubs, harness.cache), harness.hubs,
        harness.secrets, claims.AnyClaim(), harness.clock, interval=DAY)
    harness.hub.reset_counters()
    result = await fresh.reconcile(("a", "m"))
    assert result.requeue_after == DAY - 3600 and harness.hub.total_requests() == 0


async def test_claims_and_images_resolve_offline(harness: Harness) -> None:
    await harness.create("claim", {"source": {"persistentVolumeClaim": {"claimName": "models"}}})
    await harness.create("image", {"source": {"image": {
        "reference": "registry.example/team/qwen@sha256:" + "1" * 64}}})
    for name in ("claim", "image"):
        await harness.reconcile(name)
        status = await harness.status(name)
        assert status["resolved"] == {"resolvedTime": "2026-01-01T00:00:00Z"}
        assert await harness.condition(name) == ("True", "Resolved")
    assert "standalone" in json.dumps(await harness.status("claim"))
    assert harness.hub.total_requests() == 0


async def test_a_deleted_artifact_is_forgotten(harness: Harness) -> None:
    await resolved_private(harness)
    await harness.registry.modelartifacts.delete("a", "m")
    await waiting.until(lambda: harness.informer.get("a", "m") is None)
    result = await harness.resolver.reconcile(("a", "m"))
    assert result.requeue_after is None and not harness.resolver._due
