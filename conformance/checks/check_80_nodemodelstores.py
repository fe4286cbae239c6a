"""NodeModelStore: read and delete only; never created, changed or deleted by this suite."""

from __future__ import annotations

from conformance import api as a
from conformance.api import Api
from conformance.fixtures import Run
from conformance.rules import rule


@rule("nodemodelstores.list", "nodemodelstores list as a cluster-scoped NodeModelStoreList")
def check_list(admin: Api) -> None:
    response = admin.get(a.stores())
    assert response.status_code == 200, response.text[:300]
    body = response.json()
    assert body["kind"] == "NodeModelStoreList"
    for item in body["items"]:
        assert "namespace" not in item["metadata"]


@rule("nodemodelstores.create-refused", "a client create of a NodeModelStore is 405")
def check_create_refused(conformance_run: Run, admin: Api) -> None:
    body = {"apiVersion": f"{a.GROUP}/v1", "kind": "NodeModelStore",
            "metadata": {"name": f"conformance-{conformance_run.id}"}, "spec": {}}  # fmt: skip
    response = admin.post(a.stores(), body)
    assert response.status_code == 405, response.text[:300]
    assert response.json()["reason"] == "MethodNotAllowed"


@rule("nodemodelstores.update-refused", "update and patch of a NodeModelStore are 405")
def check_update_refused(conformance_run: Run, admin: Api) -> None:
    name = f"conformance-{conformance_run.id}"
    body = {"apiVersion": f"{a.GROUP}/v1", "kind": "NodeModelStore",
            "metadata": {"name": name}, "spec": {}}  # fmt: skip
    assert admin.put(a.stores(name), body).status_code == 405
    assert admin.patch(a.stores(name), {"spec": {}}, a.MERGE_PATCH).status_code == 405


@rule("nodemodelstores.delete-served", "delete is served: deleting a missing NodeModelStore is "
      "404 NotFound, not 405")  # fmt: skip
def check_delete_served(conformance_run: Run, admin: Api) -> None:
    response = admin.delete(a.stores(f"conformance-{conformance_run.id}-absent"))
    assert response.status_code == 404, response.text[:300]
    assert response.json()["reason"] == "NotFound"
