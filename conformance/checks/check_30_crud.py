"""Create, read, list, update, patch and delete ModelArtifacts."""

from __future__ import annotations

import time
from typing import Any

from conformance import api as a
from conformance.api import Api
from conformance.fixtures import RUN_LABEL, Run
from conformance.rules import rule


@rule("crud.create-get", "a create answers 201 with server-set metadata and defaults, and a get "
      "returns the same object")  # fmt: skip
def check_create_get(conformance_run: Run, admin: Api) -> None:
    created = conformance_run.create_artifact("crud-create")
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert meta["generation"] == 1
    assert created["spec"]["source"]["huggingFace"]["revision"] == "main"  # defaulted
    got = admin.get(a.artifacts(conformance_run.namespace, "crud-create"))
    assert got.status_code == 200
    assert got.json()["metadata"]["uid"] == meta["uid"]


@rule("crud.duplicate", "a second create of one name is 409 AlreadyExists")
def check_duplicate(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("crud-duplicate")
    again = admin.post(a.artifacts(conformance_run.namespace),
                       conformance_run.artifact_body("crud-duplicate"))  # fmt: skip
    assert again.status_code == 409, again.text[:300]
    assert again.json()["reason"] == "AlreadyExists"


@rule("crud.not-found", "a get of a missing artifact is 404 NotFound as a Status")
def check_not_found(conformance_run: Run, admin: Api) -> None:
    response = admin.get(a.artifacts(conformance_run.namespace, f"missing-{conformance_run.id}"))
    assert response.status_code == 404
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "NotFound"


@rule("crud.list-selector", "a list with a label selector returns only the matching objects, "
      "as a ModelArtifactList with a resourceVersion")  # fmt: skip
def check_list_selector(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("crud-list-1")
    response = admin.get(a.artifacts(conformance_run.namespace),
                         params={"labelSelector": f"{RUN_LABEL}={conformance_run.id}"})
    assert response.status_code == 200
    body = response.json()
    assert body["kind"] == "ModelArtifactList" and body["metadata"]["resourceVersion"]
    names = {item["metadata"]["name"] for item in body["items"]}
    assert "crud-list-1" in names
    none = admin.get(a.artifacts(conformance_run.namespace),
                     params={"labelSelector": f"{RUN_LABEL}=other-{conformance_run.id}"})
    assert none.json()["items"] == []


@rule("crud.update", "an update of metadata keeps generation, changes resourceVersion; a stale "
      "resourceVersion is 409 Conflict")  # fmt: skip
def check_update(conformance_run: Run, admin: Api) -> None:
    created = conformance_run.create_artifact("crud-update")

    def labelled(current: dict[str, Any]) -> dict[str, Any]:
        labels = {**current["metadata"].get("labels", {}), "x": "1"}
        return {**current, "metadata": {**current["metadata"], "labels": labels}}

    path = a.artifacts(conformance_run.namespace, "crud-update")
    # the controllers may write status meanwhile: a read-modify-write retries their conflicts
    response = admin.update(path, labelled)
    assert response.status_code == 200, response.text[:300]
    updated = response.json()
    assert updated["metadata"]["labels"]["x"] == "1"
    assert updated["metadata"]["generation"] == 1
    assert updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    stale = admin.put(path, labelled(created))  # carries the resourceVersion before the update
    assert stale.status_code == 409, stale.text[:300]
    assert stale.json()["reason"] == "Conflict"


@rule("crud.spec-immutable", "an update changing spec is refused 422 naming spec")
def check_spec_immutable(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("crud-immutable")
    response = admin.update(
        a.artifacts(conformance_run.namespace, "crud-immutable"),
        lambda current: {**current, "spec": {**current["spec"], "ignorePatterns": ["*.bin"]}})
    assert response.status_code == 422, response.text[:300]
    fields = [c.get("field", "") for c in response.json()["details"]["causes"]]
    assert any(f.startswith("spec") for f in fields), fields


@rule("patch.json-and-merge", "JSON patch and merge patch change metadata and answer 200")
def check_patches(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("patch-ok")
    path = a.artifacts(conformance_run.namespace, "patch-ok")
    json_patch = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "1"}}]
    response = admin.patch(path, json_patch, a.JSON_PATCH)
    assert response.status_code == 200, response.text[:300]
    assert response.json()["metadata"]["annotations"] == {"a": "1"}
    response = admin.patch(path, {"metadata": {"annotations": {"b": "2"}}}, a.MERGE_PATCH)
    assert response.status_code == 200, response.text[:300]
    assert response.json()["metadata"]["annotations"] == {"a": "1", "b": "2"}


@rule("patch.unsupported", "strategic merge patches are 415 UnsupportedMediaType")
def check_unsupported_patches(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("patch-415")
    path = a.artifacts(conformance_run.namespace, "patch-415")
    response = admin.patch(path, {"metadata": {"labels": {"c": "3"}}}, a.STRATEGIC_PATCH,
                           params={"fieldManager": "conformance"})
    assert response.status_code == 415, response.status_code


@rule("patch.apply", "server-side apply creates (201), re-applies without changing ownership, "
      "needs a fieldManager (422), answers another manager's field with 409 Conflict naming it, "
      "and force takes it over")  # fmt: skip
def check_server_side_apply(conformance_run: Run, admin: Api) -> None:
    name = "patch-apply"
    path = a.artifacts(conformance_run.namespace, name)
    conformance_run.ensure_namespaces()
    body = conformance_run.artifact_body(name)

    def apply(manager: str, team: str, **params: str) -> Any:
        config = {**body, "metadata": {**body["metadata"],
                                       "labels": {**body["metadata"]["labels"], "team": team}}}
        return admin.patch(path, config, a.APPLY_PATCH,
                           params={"fieldManager": manager, **params} if manager else params)

    assert apply("", "a").status_code == 422
    created = apply("conformance-a", "a")
    assert created.status_code == 201, created.text[:300]
    conformance_run.track(conformance_run.namespace, name)
    entries = created.json()["metadata"]["managedFields"]
    assert [(e["manager"], e["operation"]) for e in entries] == [("conformance-a", "Apply")]
    again = apply("conformance-a", "a")
    assert again.status_code == 200
    # controllers may write the status meanwhile, so the ownership is compared, not the version
    assert again.json()["metadata"]["managedFields"][0] == entries[0]
    conflict = apply("conformance-b", "b")
    assert conflict.status_code == 409, conflict.text[:300]
    status = conflict.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == ('Apply failed with 1 conflict: conflict with "conformance-a":'
                                 " .metadata.labels.team")
    assert status["details"]["causes"][0]["reason"] == "FieldManagerConflict"
    forced = apply("conformance-b", "b", force="true")
    assert forced.status_code == 200, forced.text[:300]
    assert forced.json()["metadata"]["labels"]["team"] == "b"


@rule("crud.delete", "a delete answers 200 and the object is then gone (404)")
def check_delete(conformance_run: Run, admin: Api) -> None:
    conformance_run.create_artifact("crud-delete")
    path = a.artifacts(conformance_run.namespace, "crud-delete")
    response = admin.delete(path)
    assert response.status_code in (200, 202), response.text[:300]
    deadline = time.monotonic() + conformance_run.options.timeout
    while admin.get(path).status_code != 404:
        assert time.monotonic() < deadline, "still present after delete"
        time.sleep(0.2)
