"""ResourceStore write semantics over a real SQLite store: create, update, status, patch, delete."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

from apiserver import errors
from apiserver.registry import build, meta, options, store, strategy
from apiserver.storage import sqlite
from devkit import admitting
from openapi import fields, resources
from tests.unit.apiserver.registry.conftest import artifact


async def test_create_sets_server_metadata_defaults_and_clears_status(
        registry: build.Registry) -> None:
    body = artifact(uid="mine", generation=7)
    body["status"] = {"observedGeneration": 3}
    created = await registry.modelartifacts.create(body, namespace="team-a")
    metadata = created["metadata"]
    assert metadata["namespace"] == "team-a"
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
                        metadata["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", metadata["creationTimestamp"])
    assert metadata["generation"] == 1
    assert int(metadata["resourceVersion"]) > 0
    assert "status" not in created
    assert created["spec"]["source"]["huggingFace"]["revision"] == "main"
    assert await registry.modelartifacts.get("team-a", "qwen") == created


async def test_create_refuses_resource_version_missing_name_and_bad_names(
        registry: build.Registry) -> None:
    with pytest.raises(errors.BadRequest, match="resourceVersion should not be set"):
        await registry.modelartifacts.create(artifact(resourceVersion="5"), namespace="a")
    nameless = artifact()
    del nameless["metadata"]["name"]
    with pytest.raises(errors.Invalid) as missing:
        await registry.modelartifacts.create(nameless, namespace="a")
    assert missing.value.body()["details"]["causes"][0]["field"] == "metadata.name"
    for bad in ("Upper", "a_b", "..", "-lead", "x" * 254):
        with pytest.raises(errors.Invalid) as invalid:
            await registry.modelartifacts.create(artifact(bad), namespace="a")
        body = invalid.value.body()
        assert body["details"]["kind"] == "ModelArtifact"
        assert body["details"]["causes"][0]["field"] == "metadata.name"


async def test_create_namespace_mismatch_and_duplicates(registry: build.Registry) -> None:
    with pytest.raises(errors.BadRequest, match="does not match the namespace sent"):
        await registry.modelartifacts.create(artifact(namespace="other"), namespace="a")
    with pytest.raises(errors.Invalid, match=r"metadata\.namespace"):
        await registry.modelartifacts.create(artifact(), namespace="Not_A_Label")
    await registry.modelartifacts.create(artifact(), namespace="a")
    with pytest.raises(errors.AlreadyExists) as exists:
        await registry.modelartifacts.create(artifact(), namespace="a")
    assert exists.value.message == 'modelartifacts.worker.gpustack.ai "qwen" already exists'
    assert exists.value.body()["details"]["kind"] == "modelartifacts"


async def test_generate_name_keeps_58_chars_and_retries_collisions(
        registry: build.Registry, storage: sqlite.Store) -> None:
    body = artifact()
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "p" * 70
    created = await registry.modelartifacts.create(body, namespace="a")
    name = created["metadata"]["name"]
    assert name.startswith("p" * 58) and len(name) == 63
    assert all(char in meta.NAME_ALPHABET for char in name[58:])

    names = iter(["job-aaaaa", "job-aaaaa", "job-bbbbb"])
    colliding = store.ResourceStore(storage, strategy.Strategy(resources.MODEL_ARTIFACT),
                                    generate_name=lambda prefix: next(names),
                                    admission=admitting.standalone())
    body["metadata"]["generateName"] = "job-"
    first = await colliding.create(body, namespace="a")
    second = await colliding.create(body, namespace="a")
    assert (first["metadata"]["name"], second["metadata"]["name"]) == ("job-aaaaa", "job-bbbbb")


async def test_dry_run_create_validates_but_stores_nothing(registry: build.Registry) -> None:
    created = await registry.modelartifacts.create(artifact(), namespace="a", dry_run=True)
    assert created["metadata"]["uid"]
    with pytest.raises(errors.NotFound):
        await registry.modelartifacts.get("a", "qwen")
    bad = artifact()
    bad["spec"] = {"source": {}}
    with pytest.raises(errors.Invalid):
        await registry.modelartifacts.create(bad, namespace="a", dry_run=True)


async def _created(registry: build.Registry) -> dict[str, Any]:
    return await registry.modelartifacts.create(artifact(), namespace="a")


async def test_update_requires_resource_version_and_refuses_stale(
        registry: build.Registry) -> None:
    created = await _created(registry)
    unversioned = artifact()
    with pytest.raises(errors.Invalid) as missing:
        await registry.modelartifacts.update(unversioned, namespace="a", name="qwen")
    assert missing.value.message.endswith(
        "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update")
    created["metadata"]["labels"] = {"x": "1"}
    updated = await registry.modelartifacts.update(created, namespace="a", name="qwen")
    assert updated["metadata"]["labels"] == {"x": "1"}
    assert updated["metadata"]["generation"] == 1  # metadata only: no bump
    with pytest.raises(errors.Conflict) as stale:
        await registry.modelartifacts.update(created, namespace="a", name="qwen")
    assert "the object has been modified" in stale.value.message
    with pytest.raises(errors.NotFound) as gone:
        await registry.modelartifacts.update(artifact("nope", resourceVersion="1"),
                                             namespace="a", name="nope")
    assert gone.value.message == 'modelartifacts.worker.gpustack.ai "nope" not found'


async def test_update_name_mismatch_and_immutable_spec(registry: build.Registry) -> None:
    created = await _created(registry)
    with pytest.raises(errors.BadRequest, match=r"\(qwen\) does not match the name on the URL"):
        await registry.modelartifacts.update(created, namespace="a", name="other")
    changed = dict(created, spec={"source": {"huggingFace": {"repository": "Qwen/Other"}}})
    with pytest.raises(errors.Invalid) as refused:
        await registry.modelartifacts.update(changed, namespace="a", name="qwen")
    assert refused.value.body()["details"]["causes"][0]["field"] == "spec"


async def test_update_keeps_status_and_status_path_keeps_the_rest(
        registry: build.Registry) -> None:
    created = await _created(registry)
    with_status = dict(created, status={"observedGeneration": 1})
    with_status["metadata"] = dict(created["metadata"], labels={"ignored": "yes"})
    written = await registry.modelartifacts.update_status(with_status, namespace="a",
                                                          name="qwen")
    assert written["status"] == {"observedGeneration": 1}
    assert "labels" not in written["metadata"]
    assert written["metadata"]["generation"] == 1
    written["status"] = {"observedGeneration": 99}
    written["metadata"]["labels"] = {"kept": "yes"}
    updated = await registry.modelartifacts.update(written, namespace="a", name="qwen")
    assert updated["status"] == {"observedGeneration": 1}
    assert updated["metadata"]["labels"] == {"kept": "yes"}


async def test_unchanged_update_writes_nothing(registry: build.Registry) -> None:
    created = await _created(registry)
    reordered = {key: created[key] for key in reversed(list(created))}
    again = await registry.modelartifacts.update(reordered, namespace="a", name="qwen")
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_generation_bumps_only_on_spec_change(registry: build.Registry) -> None:
    created = await registry.nodemodelstores.create({"metadata": {"name": "node-1"}, "spec": {}})
    created["metadata"]["labels"] = {"a": "b"}
    labelled = await registry.nodemodelstores.update(created, name="node-1")
    assert labelled["metadata"]["generation"] == 1
    labelled["spec"]["download"]["concurrency"] = 4
    respec = await registry.nodemodelstores.update(labelled, name="node-1")
    assert respec["metadata"]["generation"] == 2


async def test_modify_enforces_an_embedded_resource_version(registry: build.Registry) -> None:
    created = await _created(registry)

    def pinned(current: dict[str, Any]) -> dict[str, Any]:
        current["metadata"]["resourceVersion"] = "1000"
        return current

    with pytest.raises(errors.Conflict):
        await registry.modelartifacts.modify("a", "qwen", pinned)

    def label(current: dict[str, Any]) -> dict[str, Any]:
        current["metadata"].setdefault("labels", {})["p"] = "1"
        return current

    patched = await registry.modelartifacts.modify("a", "qwen", label)
    assert patched["metadata"]["labels"] == {"p": "1"}
    assert int(patched["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"])


async def test_delete_without_finalizers_removes_and_checks_preconditions(
        registry: build.Registry) -> None:
    created = await _created(registry)
    uid = created["metadata"]["uid"]
    with pytest.raises(errors.Conflict) as wrong_uid:
        await registry.modelartifacts.delete("a", "qwen", options.DeleteOptions(uid="nope"))
    assert wrong_uid.value.message.endswith(
        f"Precondition failed: UID in precondition: nope, UID in object meta: {uid}")
    with pytest.raises(errors.Conflict, match="ResourceVersion in precondition: 999"):
        await registry.modelartifacts.delete(
            "a", "qwen", options.DeleteOptions(resource_version="999"))
    dry = await registry.modelartifacts.delete("a", "qwen", options.DeleteOptions(dry_run=True))
    assert dry.removed
    await registry.modelartifacts.get("a", "qwen")
    result = await registry.modelartifacts.delete("a", "qwen", options.DeleteOptions(uid=uid))
    assert result.removed
    with pytest.raises(errors.NotFound):
        await registry.modelartifacts.get("a", "qwen")
    with pytest.raises(errors.NotFound):
        await registry.modelartifacts.delete("a", "qwen")


async def test_finalizers_hold_deletion_until_the_last_is_cleared(
        registry: build.Registry) -> None:
    await registry.modelartifacts.create(artifact(finalizers=["example.com/keep"]),
                                         namespace="a")
    held = await registry.modelartifacts.delete("a", "qwen")
    assert not held.removed
    metadata = held.object["metadata"]
    assert metadata["deletionTimestamp"] and metadata["deletionGracePeriodSeconds"] == 0
    assert metadata["generation"] == 2
    again = await registry.modelartifacts.delete("a", "qwen")
    assert again.object["metadata"]["resourceVersion"] == metadata["resourceVersion"]

    def add(current: dict[str, Any]) -> dict[str, Any]:
        current["metadata"]["finalizers"].append("example.com/more")
        return current

    with pytest.raises(errors.Invalid, match="no new finalizers"):
        await registry.modelartifacts.modify("a", "qwen", add)

    def clear(current: dict[str, Any]) -> dict[str, Any]:
        current["metadata"]["finalizers"] = []
        return current

    await registry.modelartifacts.modify("a", "qwen", clear)
    with pytest.raises(errors.NotFound):
        await registry.modelartifacts.get("a", "qwen")


@pytest.mark.parametrize(("policy", "finalizer"),
                         [("Foreground", "foregroundDeletion"), ("Orphan", "orphan")])
async def test_propagation_policy_adds_the_gc_finalizer(
        registry: build.Registry, policy: str, finalizer: str) -> None:
    await _created(registry)
    result = await registry.modelartifacts.delete(
        "a", "qwen", options.DeleteOptions(propagation_policy=policy))
    assert not result.removed
    assert result.object["metadata"]["finalizers"] == [finalizer]


async def test_delete_options_are_checked(registry: build.Registry) -> None:
    await _created(registry)
    with pytest.raises(errors.Invalid, match=r"DeleteOptions\.meta\.k8s\.io"):
        await registry.modelartifacts.delete(
            "a", "qwen", options.DeleteOptions(propagation_policy="Sideways"))


async def test_large_metadata_is_checked_off_the_event_loop(storage: sqlite.Store) -> None:
    offloaded: list[int] = []

    async def offload(work: Callable[[], list[fields.FieldError]]) -> list[fields.FieldError]:
        offloaded.append(1)
        return await asyncio.to_thread(work)

    resource = store.ResourceStore(storage, strategy.Strategy(resources.MODEL_ARTIFACT),
                                   offload, admission=admitting.standalone())
    await resource.create(artifact("few", labels={"a": "b"}), namespace="a")
    assert offloaded == []
    many = {f"k{i}": "v" for i in range(store.INLINE_ENTRIES + 1)}
    await resource.create(artifact("many", labels=many), namespace="a")
    assert offloaded == [1]
    with pytest.raises(errors.Invalid) as caught:
        await resource.create(artifact("bad", labels={**many, "k": "bad value"}), namespace="a")
    assert caught.value.details is not None
    assert caught.value.details["causes"][0]["field"] == "metadata.labels[k]"
    assert offloaded == [1, 1]
