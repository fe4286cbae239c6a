"""The OpenAPI documents: exact paths, GVK extensions, parameters kubectl looks for, no SMP."""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from openapi import documents, resources
from openapi import schema as schemas

BASE = "/apis/worker.gpustack.ai/v1"
NS = f"{BASE}/namespaces/{{namespace}}"
EXPECTED_PATHS = {
    f"{NS}/modelartifacts": {"get", "post"},
    f"{NS}/modelartifacts/{{name}}": {"get", "put", "patch", "delete"},
    f"{BASE}/modelartifacts": {"get"},
    f"{NS}/modelartifacts/{{name}}/progress": {"get"},
    f"{NS}/modelartifacts/{{name}}/copies": {"get"},
    f"{NS}/modelartifacts/{{name}}/manifest": {"get"},
    f"{NS}/modelartifacts/{{name}}/status": {"get", "put", "patch"},
    f"{BASE}/nodemodelstores": {"get"},
    f"{BASE}/nodemodelstores/{{name}}": {"get", "delete"},
    f"{BASE}/nodemodelstores/{{name}}/status": {"get", "put", "patch"},
    f"{NS}/modelprefetches": {"get", "post"},
    f"{NS}/modelprefetches/{{name}}": {"get", "put", "patch", "delete"},
    f"{BASE}/modelprefetches": {"get"},
    f"{NS}/modelprefetches/{{name}}/status": {"get", "put", "patch"},
    f"{BASE}/modelstores": {"get", "post"},
    f"{BASE}/modelstores/{{name}}": {"get", "put", "patch", "delete"},
    f"{BASE}/modelstores/{{name}}/status": {"get", "put", "patch"},
    f"{NS}/modelstorebindings": {"get", "post"},
    f"{NS}/modelstorebindings/{{name}}": {"get", "put", "patch", "delete"},
    f"{BASE}/modelstorebindings": {"get"},
    f"{NS}/modelstorebindings/{{name}}/status": {"get", "put", "patch"},
}
METHODS = {"get", "put", "post", "patch", "delete"}


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for url, item in doc["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield url, method, operation


@pytest.fixture(params=["v2", "v3"])
def doc(request: pytest.FixtureRequest) -> dict[str, Any]:
    return documents.openapi_v2() if request.param == "v2" else documents.openapi_v3()


def test_paths_and_methods_are_exact(doc: dict[str, Any]) -> None:
    served = {url: {m for m in item if m in METHODS} for url, item in doc["paths"].items()}
    assert served == EXPECTED_PATHS


def test_every_operation_names_its_action_and_an_object_gvk(doc: dict[str, Any]) -> None:
    actions = {"get", "list", "post", "put", "patch", "delete"}
    for url, method, operation in operations(doc):
        assert operation["x-kubernetes-action"] in actions, url
        gvk = operation["x-kubernetes-group-version-kind"]
        assert isinstance(gvk, dict)
        assert gvk["group"] == "worker.gpustack.ai" and gvk["version"] == "v1"
        expected = "ModelArtifactProgress" if url.endswith("/progress") else (
            "ModelArtifactCopies" if url.endswith("/copies") else
            "ModelArtifactManifest" if url.endswith("/manifest") else
            "ModelArtifact" if "modelartifacts" in url else
            "ModelPrefetch" if "modelprefetches" in url else
            "ModelStoreBinding" if "/modelstorebindings" in url else
            "ModelStore" if "/modelstores" in url else "NodeModelStore")
        assert gvk["kind"] == expected, (url, method)
    list_ops = [op for url, m, op in operations(doc) if op["x-kubernetes-action"] == "list"]
    assert len(list_ops) == 8


def query_names(operation: dict[str, Any]) -> set[str]:
    return {p["name"] for p in operation["parameters"] if p["in"] == "query"}


def test_writes_carry_field_validation_and_friends(doc: dict[str, Any]) -> None:
    writes = [(u, m, op) for u, m, op in operations(doc) if m in ("post", "put", "patch")]
    # create, replace and patch of MA, MP, MS and MSB, replace and patch of every status
    assert len(writes) == 22
    for _, _, operation in writes:
        assert {"fieldValidation", "fieldManager", "dryRun", "pretty"} <= query_names(operation)
        # force belongs to apply patches only, as in kube's documents
        assert ("force" in query_names(operation)) == (operation is not None and
                                                      _is_patch(operation))
    delete = doc["paths"][f"{NS}/modelartifacts/{{name}}"]["delete"]
    assert {"dryRun", "propagationPolicy", "gracePeriodSeconds"} <= query_names(delete)
    listing = doc["paths"][f"{NS}/modelartifacts"]["get"]
    assert {"watch", "labelSelector", "fieldSelector", "limit", "continue",
            "resourceVersion", "resourceVersionMatch", "sendInitialEvents",
            "allowWatchBookmarks", "timeoutSeconds"} <= query_names(listing)


def test_path_parameters_are_declared(doc: dict[str, Any]) -> None:
    for url, item in doc["paths"].items():
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        wanted = {part[1:-1] for part in url.split("/") if part.startswith("{")}
        assert declared == wanted, url
        assert all(p["required"] for p in item.get("parameters", []))


def test_patch_accepts_only_json_patch_and_merge_patch() -> None:
    v3, v2 = documents.openapi_v3(), documents.openapi_v2()
    for _, method, operation in operations(v3):
        if method == "patch":
            assert set(operation["requestBody"]["content"]) == set(documents.PATCH_TYPES)
    for _, method, operation in operations(v2):
        if method == "patch":
            assert operation["consumes"] == list(documents.PATCH_TYPES)
    for doc in (v2, v3):
        text = json.dumps(doc)
        assert "strategic-merge-patch" not in text


def test_component_schemas_carry_list_gvks() -> None:
    components = documents.openapi_v3()["components"]["schemas"]
    definitions = documents.openapi_v2()["definitions"]
    for kind in ("ModelArtifact", "NodeModelStore", "ModelPrefetch", "ModelArtifactProgress",
                 "ModelArtifactList", "NodeModelStoreList", "ModelPrefetchList", "ModelStore",
                 "ModelStoreList", "ModelStoreBinding", "ModelStoreBindingList"):
        for table in (components, definitions):
            gvk = table[f"io.gpustack.worker.v1.{kind}"]["x-kubernetes-group-version-kind"]
            assert gvk == [{"group": "worker.gpustack.ai", "kind": kind, "version": "v1"}]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in components
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.Status" in definitions


def refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref":
                yield item
            else:
                yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


def test_every_reference_resolves() -> None:
    v3 = documents.openapi_v3()
    v3_refs = set(refs(v3))
    assert v3_refs
    for ref in v3_refs:
        assert ref.startswith("#/components/schemas/")
        assert ref.removeprefix("#/components/schemas/") in v3["components"]["schemas"]
    v2 = documents.openapi_v2()
    for ref in set(refs(v2)):
        assert ref.startswith("#/definitions/")
        assert ref.removeprefix("#/definitions/") in v2["definitions"]


def test_v2_has_no_v3_only_keywords() -> None:
    text = json.dumps(documents.openapi_v2())
    assert '"nullable"' not in text and '"allOf"' not in text
    assert "#/components/" not in text


def schema_paths(schema: dict[str, Any], prefix: str, table: dict[str, Any],
                 prefix_ref: str) -> Iterator[str]:
    """Every property path in ``schema``, following references inside ``table``."""
    while True:
        if "$ref" in schema:
            schema = table[schema["$ref"].removeprefix(prefix_ref)]
        elif "allOf" in schema:
            schema = schema["allOf"][0]
        else:
            break
    if prefix.count(".") > 6:
        return
    for name, sub in schema.get("properties", {}).items():
        yield f"{prefix}.{name}"
        yield from schema_paths(sub, f"{prefix}.{name}", table, prefix_ref)
    if isinstance(schema.get("items"), dict):
        yield from schema_paths(schema["items"], f"{prefix}[]", table, prefix_ref)


@pytest.mark.parametrize("kind", ["ModelArtifact", "NodeModelStore", "ModelPrefetch",
                                  "ModelArtifactProgress", "ModelStore", "ModelStoreBinding"])
def test_every_schema_property_reaches_both_documents(kind: str) -> None:
    source = set(schema_paths(schemas.for_kind(kind), kind, schemas.DEFINITIONS,
                              "#/components/schemas/"))
    assert f"{kind}.spec" in source or kind == "ModelArtifactProgress"
    assert len(source) > 20
    v3 = documents.openapi_v3()["components"]["schemas"]
    name = schemas.definition_name(kind)
    assert set(schema_paths(v3[name], kind, v3, "#/components/schemas/")) == source
    v2 = documents.openapi_v2()["definitions"]
    assert set(schema_paths(v2[name], kind, v2, "#/definitions/")) == source


def test_documents_are_deterministic_and_independent() -> None:
    first = documents.openapi_v3()
    first["components"]["schemas"].clear()
    second = documents.openapi_v3()
    assert second["components"]["schemas"]
    assert json.dumps(documents.openapi_v2(), sort_keys=True) == json.dumps(
        documents.openapi_v2(), sort_keys=True)


def test_document_headers() -> None:
    assert documents.openapi_v3()["openapi"].startswith("3.0")
    assert documents.openapi_v2()["swagger"] == "2.0"
    assert set(resources.BY_PLURAL) == {"modelartifacts", "nodemodelstores", "modelprefetches",
                                        "modelstores", "modelstorebindings"}


def _is_patch(operation: dict[str, Any]) -> bool:
    return str(operation.get("operationId", "")).startswith("patch")
