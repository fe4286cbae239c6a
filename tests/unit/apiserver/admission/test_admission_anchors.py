"""Admission rule ``AnchorGrant`` (issue 35), through the real registry on SQLite and the
standalone authorizer: only a user allowed verb ``anchor`` on ``modelartifacts`` sets or changes
the annotation ``worker.gpustack.ai/anchor-grant`` (403 naming the rule otherwise, 503 when the
authorizer cannot say); an allowed grant is recorded in ``status.anchorGrant``, which no client
can write, and removing the annotation removes it. A tenant's ``expectedDigest`` itself stays
admitted: without a grant it is an assertion the hub must confirm."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission import anchors as anchor_rule
from apiserver.admission import attributes as admission
from apiserver.admission import chain, facts
from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer, policy, rbac
from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.storage import sqlite
from devkit import admitting
from openapi import anchors

DIGEST = "sha256:" + "ab" * 32
GRANT = anchors.ANNOTATION
ADMIN = users.UserInfo("admin", groups=(users.MASTERS, users.AUTHENTICATED))
ALICE = users.UserInfo("alice", groups=(users.AUTHENTICATED,))
OPS = users.UserInfo("ops", groups=(users.AUTHENTICATED,))
BINDINGS = rbac.Policy(bindings=(
    rbac.Binding("alice-editor", "ClusterRole", policy.TENANT_EDITOR_ROLE,
                 (rbac.Subject("User", "alice"),), "team-a"),
    rbac.Binding("ops-editor", "ClusterRole", policy.TENANT_EDITOR_ROLE,
                 (rbac.Subject("User", "ops"),), "team-c"),
    rbac.Binding("ops-import", "ClusterRole", policy.ANCHOR_GRANTER_ROLE,
                 (rbac.Subject("User", "ops"),), "team-c"),
))


def _artifact(name: str = "m", namespace: str = "team-a", *,
              annotations: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": metadata, **extra,
            "spec": {"source": {"huggingFace": {"repository": "org/model"}},
                     "expectedDigest": DIGEST}}


@pytest.fixture
def registry(storage: sqlite.Store) -> build.Registry:
    return build.build(storage, admission=admitting.standalone(extra=BINDINGS))


class As:
    """Writes made by one user's request (what the endpoints say for each request); None: the
    server's own write."""

    def __init__(self, registry: build.Registry, user: users.UserInfo | None) -> None:
        self.store = registry.modelartifacts
        self.user = user

    def _acting(self) -> contextlib.AbstractContextManager[None]:
        if self.user is None:
            return contextlib.nullcontext()
        return admission.requested_by(self.user)

    async def create(self, obj: dict[str, Any], **options: Any) -> dict[str, Any]:
        with self._acting():
            return await self.store.create(obj, namespace=obj["metadata"]["namespace"],
                                           **options)

    async def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        with self._acting():
            return await self.store.update(obj, namespace=meta["namespace"], name=meta["name"])


async def test_a_tenant_cannot_grant_an_anchor_at_creation(registry: build.Registry) -> None:
    with pytest.raises(errors.Forbidden) as refused:
        await As(registry, ALICE).create(_artifact(annotations={GRANT: "mine"}))
    message = refused.value.message
    assert message.startswith('modelartifacts.worker.gpustack.ai "m" is forbidden: User "alice" '
                              'cannot anchor resource "modelartifacts" in API group '
                              '"worker.gpustack.ai" in the namespace "team-a": rule AnchorGrant')
    assert GRANT in message
    with pytest.raises(errors.Forbidden):  # a dry run is judged the same
        await As(registry, ALICE).create(_artifact(annotations={GRANT: "mine"}), dry_run=True)
    with pytest.raises(errors.NotFound):
        await registry.modelartifacts.get("team-a", "m")


async def test_a_tenants_expected_digest_is_admitted_without_a_grant(
        registry: build.Registry) -> None:
    created = await As(registry, ALICE).create(_artifact())
    assert created["spec"]["expectedDigest"] == DIGEST and "status" not in created


async def test_nobody_writes_the_record_but_the_rule(registry: build.Registry) -> None:
    forged = {"anchorGrant": {"grantedTime": "2020-01-01T00:00:00Z"}}
    created = await As(registry, ALICE).create(_artifact(status=forged))
    assert "status" not in created  # a create's status is the server's
    created["status"] = forged
    updated = await As(registry, ALICE).update(created)
    assert "status" not in updated  # a main-resource update keeps the stored status


async def test_an_administrator_grants_and_the_server_records_it(
        registry: build.Registry) -> None:
    created = await As(registry, ADMIN).create(_artifact(annotations={GRANT: "legacy import"}))
    assert set(created["status"]["anchorGrant"]) == {"grantedTime"}
    stored = await registry.modelartifacts.get("team-a", "m")
    assert stored["status"] == created["status"]


async def test_the_granter_role_grants_where_it_is_bound_only(registry: build.Registry) -> None:
    ops = As(registry, OPS)
    granted = await ops.create(_artifact(namespace="team-c", annotations={GRANT: "ops"}))
    assert "anchorGrant" in granted["status"]
    plain = await As(registry, ADMIN).create(_artifact(namespace="team-a"))
    plain["metadata"]["annotations"] = {GRANT: "ops"}
    with pytest.raises(errors.Forbidden, match='in the namespace "team-a": rule AnchorGrant'):
        await ops.update(plain)


async def test_a_tenant_may_keep_or_remove_a_grant_but_not_add_or_change_one(
        registry: build.Registry) -> None:
    await As(registry, ADMIN).create(_artifact(annotations={GRANT: "legacy import"}))
    alice = As(registry, ALICE)
    current = await registry.modelartifacts.get("team-a", "m")
    record = current["status"]["anchorGrant"]

    changed = copy.deepcopy(current)
    changed["metadata"]["annotations"][GRANT] = "mine now"
    with pytest.raises(errors.Forbidden, match="AnchorGrant"):
        await alice.update(changed)

    labelled = copy.deepcopy(current)
    labelled["metadata"]["labels"] = {"team": "a"}
    kept = await alice.update(labelled)
    assert kept["status"]["anchorGrant"] == record  # unchanged: the record stands

    kept["metadata"]["annotations"] = {}
    removed = await alice.update(kept)
    assert "status" not in removed  # the record goes with the annotation

    removed["metadata"]["annotations"] = {GRANT: "legacy import"}
    with pytest.raises(errors.Forbidden, match="AnchorGrant"):
        await alice.update(removed)  # and it cannot be put back


async def test_an_annotation_from_before_the_rule_grants_nothing_until_regranted(
        storage: sqlite.Store) -> None:
    """An annotation a tenant wrote before this rule existed carries no record, and keeping it
    unchanged makes none; an administrator grants by giving it a new value."""
    older = build.build(storage, admission=chain.Chain(
        facts.standalone(admitting.WORKER, admitting.PLUGIN), writers=[], mutating=[],
        validating=[]))
    await As(older, ALICE).create(_artifact(annotations={GRANT: "planted"}))
    registry = build.build(storage, admission=admitting.standalone(extra=BINDINGS))
    planted = await registry.modelartifacts.get("team-a", "m")
    assert "status" not in planted
    planted["metadata"]["labels"] = {"still": "planted"}
    kept = await As(registry, ALICE).update(planted)
    assert "status" not in kept
    kept["metadata"]["annotations"][GRANT] = "granted by admin"
    granted = await As(registry, ADMIN).update(kept)
    assert "anchorGrant" in granted["status"]


class Undecided:
    async def authorize(self, attributes: attrs.Attributes) -> authorizer.Verdict:
        return authorizer.Verdict(authorizer.Decision.NO_OPINION,
                                  error="SubjectAccessReview failed: timeout")


class Recording:
    def __init__(self) -> None:
        self.asked: list[attrs.Attributes] = []

    async def authorize(self, attributes: attrs.Attributes) -> authorizer.Verdict:
        self.asked.append(attributes)
        return authorizer.ALLOW


async def test_an_undecided_question_is_a_503_naming_the_rule(storage: sqlite.Store) -> None:
    registry = build.build(storage, admission=chain.build(facts.standalone(
        admitting.WORKER, admitting.PLUGIN, authorizer=Undecided())))
    with pytest.raises(errors.ServiceUnavailable, match="rule AnchorGrant could not be checked"):
        await As(registry, ADMIN).create(_artifact(annotations={GRANT: "x"}))


async def test_the_question_asked_is_anchor_on_that_artifact(storage: sqlite.Store) -> None:
    judge = Recording()
    registry = build.build(storage, admission=chain.build(facts.standalone(
        admitting.WORKER, admitting.PLUGIN, authorizer=judge)))
    await As(registry, ALICE).create(_artifact(name="qwen", annotations={GRANT: "x"}))
    (asked,) = judge.asked
    assert (asked.user, asked.verb, asked.api_group, asked.api_version, asked.resource,
            asked.subresource, asked.namespace, asked.name, asked.resource_request) == (
        ALICE, "anchor", "worker.gpustack.ai", "v1", "modelartifacts", "", "team-a", "qwen",
        True)
    assert anchor_rule.attributes(ALICE, "team-a", "qwen") == asked


async def test_without_a_requester_or_an_authorizer_nothing_is_granted(
        storage: sqlite.Store, registry: build.Registry) -> None:
    with pytest.raises(errors.Forbidden, match="the write has no requester"):
        await As(registry, None).create(_artifact(annotations={GRANT: "x"}))
    bare = build.build(storage, admission=chain.build(facts.standalone(
        admitting.WORKER, admitting.PLUGIN)))
    with pytest.raises(errors.Forbidden, match="the server has no authorizer"):
        await As(bare, ADMIN).create(_artifact(annotations={GRANT: "x"}))
