"""Anchors need proof (issue 35), the resolver's side, against the fixture hub with one
repository that never answers (503): an artifact's ``expectedDigest`` becomes its resolution
after two outages a minute apart only when its namespace has a hub-verified artifact with that
digest, now or recorded before (the worker's record in the server's storage, which outlives the
artifact and a restart), or an administrator's grant; otherwise ``AnchorNotGranted``, naming
why, and the hub is asked again. An anchor resolved before proofs existed, or whose grant is
removed, or whose verification the hub refuses later, loses the resolution."""

from __future__ import annotations

import pathlib
from typing import Any

from apiserver.admission import attributes as admission
from apiserver.auth import user as users
from controllers.runtime import client as clients
from controllers.runtime import errors, proofs
from devkit import fixturehub
from openapi import anchors
from tests.unit.controllers.conftest import DAY, Harness
from tests.unit.controllers.resolver.test_resolver_huggingface import FILES, expected_digest

VERIFIED = "org/model"
DOWN = "org/unreachable"
TOKEN = "hf_anchor_token_1"
GRANT = {anchors.ANNOTATION: "legacy import of node-1's cache"}
TENANT = users.UserInfo("alice", groups=(users.AUTHENTICATED,))


def hf(repo: str, **spec: Any) -> dict[str, Any]:
    return {"source": {"huggingFace": {"repository": repo}}, **spec}


def _hub(harness: Harness) -> str:
    harness.hub.add_repo(VERIFIED, FILES)
    harness.hub.add_repo(DOWN, {"config.json": b"{}"})
    harness.hub.faults(DOWN).fail_times = 1_000_000
    return expected_digest(harness.hub, VERIFIED)


async def _verified(harness: Harness, name: str = "verified", namespace: str = "a") -> None:
    """An artifact the hub resolves, and its next pass (the one its own status write wakes),
    which records the verification."""
    await harness.create(name, hf(VERIFIED), namespace)
    await harness.reconcile(name, namespace)
    assert await _condition(harness, name, namespace) == ("True", "Resolved")
    await harness.reconcile(name, namespace)


async def _two_outages(harness: Harness, name: str, namespace: str = "a") -> Any:
    await harness.reconcile(name, namespace)
    assert await _condition(harness, name, namespace) == ("False", "SourceUnavailable")
    harness.clock.advance(60)
    return await harness.reconcile(name, namespace)


async def _condition(harness: Harness, name: str, namespace: str = "a") -> tuple[str, str]:
    for c in (await harness.status(name, namespace)).get("conditions") or []:
        if c["type"] == "Resolved":
            return c["status"], c["reason"]
    return ("", "")


async def _message(harness: Harness, name: str, namespace: str = "a") -> str:
    for c in (await harness.status(name, namespace)).get("conditions") or []:
        if c["type"] == "Resolved":
            return str(c["message"])
    return ""


async def test_another_namespaces_digest_is_not_granted(harness: Harness) -> None:
    """The probe: team b's verified digest, anchored in team a while the hub does not answer."""
    digest = _hub(harness)
    await _verified(harness, namespace="b")
    await harness.create("steal", hf(DOWN, expectedDigest=digest), "a")
    first = await harness.reconcile("steal", "a")
    assert await _condition(harness, "steal") == ("False", "SourceUnavailable")
    assert "may not stand for the content" in await _message(harness, "steal")
    assert first.requeue_after == 60.0
    harness.clock.advance(60)
    second = await harness.reconcile("steal", "a")
    status = await harness.status("steal")
    assert await _condition(harness, "steal") == ("False", "AnchorNotGranted")
    assert "resolved" not in status
    message = await _message(harness, "steal")
    assert "namespace a has no artifact the hub resolved to that digest" in message
    assert digest in message and "no administrator granted it" in message
    assert "worker.gpustack.ai/anchor-grant" in message and "verb anchor" in message
    assert second.requeue_after == 60.0  # the hub is asked again
    assert harness.events.seen[-1][:2] == ("Warning", "AnchorNotGranted")
    # when the hub answers, the anchor is what it always was: an assertion
    harness.hub.faults(DOWN).fail_times = 0
    harness.clock.advance(60)
    await harness.reconcile("steal", "a")
    assert await _condition(harness, "steal") == ("False", "DigestMismatch")


async def test_an_administrators_grant_lets_the_anchor_stand(harness: Harness) -> None:
    digest = _hub(harness)
    await harness.create("imported", hf(DOWN, expectedDigest=digest), "c", annotations=GRANT)
    stored = await harness.stored("imported", "c")
    assert set(stored["status"]["anchorGrant"]) == {"grantedTime"}
    result = await _two_outages(harness, "imported", "c")
    resolved = (await harness.status("imported", "c"))["resolved"]
    assert resolved["digestSource"] == "Expected" and resolved["anchorProof"] == "Grant"
    assert resolved["manifestDigest"] == digest
    assert "an administrator granted the anchor" in await _message(harness, "imported", "c")
    assert result.requeue_after is None


async def test_a_hub_verified_artifact_of_the_namespace_proves_it(harness: Harness) -> None:
    digest = _hub(harness)
    await _verified(harness)
    await harness.create("pinned", hf(DOWN, expectedDigest=digest))
    await harness.reconcile("pinned")
    assert "becomes the resolution (ModelArtifact a/verified" in await _message(
        harness, "pinned")
    harness.clock.advance(60)
    await harness.reconcile("pinned")
    resolved = (await harness.status("pinned"))["resolved"]
    assert (resolved["digestSource"], resolved["anchorProof"]) == ("Expected", "HubVerified")
    assert "ModelArtifact a/verified resolved to it from the hub" in await _message(
        harness, "pinned")


async def test_a_verification_is_remembered_after_the_artifact_and_a_restart(
        harness: Harness, hub: fixturehub.Hub, tmp_path: pathlib.Path) -> None:
    digest = _hub(harness)
    await _verified(harness)
    await harness.registry.modelartifacts.delete("a", "verified")
    harness.clock.advance(3600)
    (tmp_path / "restarted").mkdir()
    restarted = Harness(hub, harness.registry, tmp_path / "restarted")  # a new worker process
    restarted.clock.advance(3600)
    await restarted.start()
    try:
        await restarted.create("pinned", hf(DOWN, expectedDigest=digest))
        await _two_outages(restarted, "pinned")
        resolved = (await restarted.status("pinned"))["resolved"]
        assert resolved["anchorProof"] == "HubVerified"
        assert ("ModelArtifact a/verified resolved to it from the hub, last confirmed at "
                "2026-01-01T00:00:00Z") in await _message(restarted, "pinned")
        # a day after that verification, it no longer makes a new anchor
        restarted.clock.advance(DAY)
        await restarted.create("later", hf(DOWN, expectedDigest=digest))
        await _two_outages(restarted, "later")
        assert await _condition(restarted, "later") == ("False", "AnchorNotGranted")
        assert "within the last 24h" in await _message(restarted, "later")
        # and an anchor that stands on it keeps standing
        await restarted.reconcile("pinned")
        assert await _condition(restarted, "pinned") == ("True", "Resolved")
    finally:
        await restarted.close()


async def test_an_anchor_resolved_before_proofs_existed_is_withdrawn(harness: Harness) -> None:
    """What the resolver wrote before issue 35's fix: the anchor, with nothing to stand on."""
    digest = _hub(harness)
    await harness.create("steal", hf(DOWN, expectedDigest=digest))
    obj = await harness.stored("steal")
    obj["status"] = {
        "resolved": {"manifestDigest": digest, "digestSource": "Expected",
                     "resolvedTime": "2025-12-01T00:00:00Z"},
        "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved",
                        "message": "", "lastTransitionTime": "2025-12-01T00:00:00Z"}]}
    await harness.api.update_status(clients.MODEL_ARTIFACTS, obj)  # as the worker
    harness.hub.reset_counters()
    result = await harness.reconcile("steal")
    status = await harness.status("steal")
    assert await _condition(harness, "steal") == ("False", "AnchorNotGranted")
    assert "resolved" not in status
    message = await _message(harness, "steal")
    assert f"the resolution to the anchor {digest} is withdrawn" in message
    assert "running Pods keep theirs" in message
    assert result.requeue_after is None and harness.hub.total_requests() == 0
    await harness.reconcile("steal")  # the write's own wake-up: the hub is asked again
    assert harness.hub.total_requests() > 0
    assert await _condition(harness, "steal") == ("False", "SourceUnavailable")


async def test_removing_the_grant_withdraws_the_anchor(harness: Harness) -> None:
    digest = _hub(harness)
    await harness.create("imported", hf(DOWN, expectedDigest=digest), annotations=GRANT)
    await _two_outages(harness, "imported")
    assert await _condition(harness, "imported") == ("True", "Resolved")
    stored = await harness.stored("imported")
    del stored["metadata"]["annotations"][anchors.ANNOTATION]
    with admission.requested_by(TENANT):
        await harness.registry.modelartifacts.update(stored, namespace="a", name="imported")
    assert "anchorGrant" not in await harness.status("imported")
    await harness.reconcile("imported")
    assert await _condition(harness, "imported") == ("False", "AnchorNotGranted")
    assert "no administrator granted it" in await _message(harness, "imported")


async def test_a_grant_gives_way_to_a_verification_of_the_namespace(harness: Harness) -> None:
    digest = _hub(harness)
    await harness.create("imported", hf(DOWN, expectedDigest=digest), annotations=GRANT)
    await _two_outages(harness, "imported")
    await _verified(harness)
    stored = await harness.stored("imported")
    del stored["metadata"]["annotations"][anchors.ANNOTATION]
    with admission.requested_by(TENANT):
        await harness.registry.modelartifacts.update(stored, namespace="a", name="imported")
    await harness.reconcile("imported")
    assert await _condition(harness, "imported") == ("True", "Resolved")
    assert (await harness.status("imported"))["resolved"]["anchorProof"] == "HubVerified"


async def test_a_refused_verification_withdraws_the_anchors_standing_on_it(
        harness: Harness) -> None:
    harness.hub.add_repo(VERIFIED, FILES, private_token=TOKEN)
    harness.hub.add_repo(DOWN, {"config.json": b"{}"})
    harness.hub.faults(DOWN).fail_times = 1_000_000
    digest = expected_digest(harness.hub, VERIFIED)
    harness.secret("hf", TOKEN)
    await harness.create("verified", {"source": {"huggingFace": {
        "repository": VERIFIED, "secretRef": {"name": "hf"}}}})
    await harness.reconcile("verified")
    await harness.reconcile("verified")
    await harness.create("pinned", hf(DOWN, expectedDigest=digest))
    await _two_outages(harness, "pinned")
    assert (await harness.status("pinned"))["resolved"]["anchorProof"] == "HubVerified"
    harness.hub.repo(VERIFIED).private_token = "someone-else"  # the namespace lost access
    harness.clock.advance(DAY)
    await harness.reconcile("verified")
    harness.clock.advance(60)
    await harness.reconcile("verified")
    assert await _condition(harness, "verified") == ("False", "AccessDenied")
    assert await harness.ledger.read("a", digest) is not None
    await harness.reconcile("verified")  # its status write's wake-up drops the record...
    assert await harness.ledger.read("a", digest) is None
    assert harness.resolver.anchoring.anchored_to("a", digest) == [("a", "pinned")]
    await harness.reconcile("pinned")  # ...and judges the anchors on it again
    assert await _condition(harness, "pinned") == ("False", "AnchorNotGranted")
    assert "resolved" not in await harness.status("pinned")


class Unreadable:
    """A record that cannot be read (its storage down): ``proofs.Ledger``'s failure."""

    def __init__(self) -> None:
        self.down = False
        self.kept = proofs.InMemory()

    async def read(self, namespace: str, digest: str) -> proofs.Record | None:
        if self.down:
            raise errors.ApiError("storage unavailable", code=503)
        return await self.kept.read(namespace, digest)

    async def write(self, record: proofs.Record) -> None:
        await self.kept.write(record)

    async def delete(self, namespace: str, digest: str, uid: str) -> None:
        await self.kept.delete(namespace, digest, uid)


async def test_a_record_that_cannot_be_read_makes_no_anchor_and_withdraws_none(
        hub: fixturehub.Hub, harness: Harness, tmp_path: pathlib.Path) -> None:
    ledger = Unreadable()
    (tmp_path / "unreadable").mkdir()
    running = Harness(hub, harness.registry, tmp_path / "unreadable", ledger=ledger)
    await running.start()
    try:
        digest = _hub(running)
        await _verified(running)
        await running.registry.modelartifacts.delete("a", "verified")  # the record alone proves
        await running.create("pinned", hf(DOWN, expectedDigest=digest))
        await _two_outages(running, "pinned")
        assert (await running.status("pinned"))["resolved"]["anchorProof"] == "HubVerified"
        ledger.down = True
        kept = await running.reconcile("pinned")
        assert await _condition(running, "pinned") == ("True", "Resolved")  # nothing withdrawn
        assert kept.requeue_after == 60.0  # checked again a minute later
        await running.create("later", hf(DOWN, expectedDigest=digest))
        await _two_outages(running, "later")
        assert await _condition(running, "later") == ("False", "AnchorNotGranted")
        assert "could not be told" in await _message(running, "later")
        assert "storage unavailable" in await _message(running, "later")
    finally:
        await running.close()
