"""RBAC-scoped tenant access, with a tenant holding model-artifact-reader in one namespace."""

from __future__ import annotations

import pytest

from conformance import api as a
from conformance.api import Api
from conformance.fixtures import Run
from conformance.rules import rule


@pytest.fixture
def tenant_artifact(conformance_run: Run, tenant: Api) -> str:
    namespace = conformance_run.options.tenant_namespace
    assert namespace is not None
    name = f"tenant-{conformance_run.id}"
    if not conformance_run.created(namespace, name):  # one artifact for all the tenant checks
        conformance_run.create_artifact(name, namespace=namespace)
    return namespace


@rule("tenant.reads-own", "the tenant gets, lists and watches artifacts and reads progress in "
      "its namespace")  # fmt: skip
def check_reads_own(conformance_run: Run, tenant: Api, tenant_artifact: str) -> None:
    name = f"tenant-{conformance_run.id}"
    assert tenant.get(a.artifacts(tenant_artifact, name)).status_code == 200
    assert tenant.get(a.artifacts(tenant_artifact)).status_code == 200
    assert tenant.get(a.artifacts(tenant_artifact, name) + "/progress").status_code == 200
    events = tenant.watch(a.artifacts(tenant_artifact), {"fieldSelector": f"metadata.name={name}"},
                          1)  # fmt: skip
    assert next(events)["type"] == "ADDED"


@rule("tenant.writes-refused", "the read-only tenant is refused create, update and delete (403)")
def check_writes_refused(conformance_run: Run, tenant: Api, tenant_artifact: str) -> None:
    name = f"tenant-{conformance_run.id}"
    body = conformance_run.artifact_body(f"tenant-new-{conformance_run.id}", tenant_artifact)
    created = tenant.post(a.artifacts(tenant_artifact), body)
    if created.status_code == 201:
        conformance_run.track(tenant_artifact, body["metadata"]["name"])
    assert created.status_code == 403, created.status_code
    patch = tenant.patch(a.artifacts(tenant_artifact, name), {"metadata": {"labels": {"t": "1"}}},
                         a.MERGE_PATCH)  # fmt: skip
    assert patch.status_code == 403
    assert tenant.delete(a.artifacts(tenant_artifact, name)).status_code == 403


@rule("tenant.other-namespaces-refused", "the tenant is refused another namespace, cluster-wide "
      "lists and NodeModelStores (403)")  # fmt: skip
def check_other_namespaces(conformance_run: Run, tenant: Api, tenant_artifact: str) -> None:
    other = next(n for n in conformance_run.namespaces if n != tenant_artifact)
    conformance_run.create_artifact("tenant-elsewhere", namespace=other)
    assert tenant.get(a.artifacts(other, "tenant-elsewhere")).status_code == 403
    assert tenant.get(a.artifacts(other, "tenant-elsewhere") + "/progress").status_code == 403
    assert tenant.get(f"{a.GV}/modelartifacts").status_code == 403
    assert tenant.get(a.stores()).status_code == 403


@rule("tenant.status-refused", "RBAC refuses the tenant writing the status of its own artifacts "
      "and of NodeModelStores (403 naming the subresource, before any status guard)")
def check_status_refused(conformance_run: Run, admin: Api, tenant: Api,
                         tenant_artifact: str) -> None:
    path = a.artifacts(tenant_artifact, f"tenant-{conformance_run.id}") + "/status"
    body = admin.get(path).json()
    put = tenant.put(path, {**body, "status": {"observedGeneration": 1}})
    assert put.status_code == 403, put.text[:300]
    patch = tenant.patch(path, {"status": {"observedGeneration": 1}}, a.MERGE_PATCH)
    assert patch.status_code == 403, patch.text[:300]
    assert 'cannot patch resource "modelartifacts/status"' in patch.json()["message"]
    stores = admin.get(a.stores()).json()["items"]
    name = stores[0]["metadata"]["name"] if stores else f"conformance-{conformance_run.id}"
    store = tenant.patch(a.stores(name) + "/status", {"status": {}}, a.MERGE_PATCH)
    assert store.status_code == 403, store.text[:300]
    assert 'cannot patch resource "nodemodelstores/status"' in store.json()["message"]


@rule("tenant.progress-needs-its-own-grant", "a subject granted only get on modelartifacts "
      "reads an artifact but is refused its progress (403): progress is its own subresource")
def check_get_does_not_grant_progress(conformance_run: Run, admin: Api, tenant_artifact: str,
                                      get_only_user: str) -> None:
    as_getter = {"Impersonate-User": get_only_user}
    path = a.artifacts(tenant_artifact, f"tenant-{conformance_run.id}")
    got = admin.get(path, headers=as_getter)
    assert got.status_code == 200, f"get as {get_only_user}: {got.status_code} {got.text[:200]}"
    progress = admin.get(path + "/progress", headers=as_getter)
    assert progress.status_code == 403, progress.text[:300]
    assert 'cannot get resource "modelartifacts/progress"' in progress.json()["message"]
    listed = admin.get(a.artifacts(tenant_artifact), headers=as_getter)
    assert listed.status_code == 403, listed.text[:300]  # get only: not even list
