"""OpenAPI v2 and v3 documents, and kubectl explain built from them."""

from __future__ import annotations

from conformance import api as a
from conformance.api import Api
from conformance.kubectl import Kubectl
from conformance.rules import rule


@rule("openapi.v2", "/openapi/v2 defines ModelArtifact and NodeModelStore with their "
      "group-version-kind")  # fmt: skip
def check_v2(admin: Api) -> None:
    response = admin.get("/openapi/v2")
    assert response.status_code == 200, response.status_code
    definitions = response.json()["definitions"]
    kinds = {
        (gvk["group"], gvk["version"], gvk["kind"])
        for schema in definitions.values()
        for gvk in schema.get("x-kubernetes-group-version-kind", [])
    }
    assert (a.GROUP, "v1", "ModelArtifact") in kinds
    assert (a.GROUP, "v1", "NodeModelStore") in kinds


@rule("openapi.v3", "/openapi/v3 links apis/worker.gpustack.ai/v1, whose document describes "
      "spec.source of a ModelArtifact")  # fmt: skip
def check_v3(admin: Api) -> None:
    index = admin.get("/openapi/v3")
    assert index.status_code == 200, index.status_code
    link = index.json()["paths"][f"apis/{a.GROUP}/v1"]["serverRelativeURL"]
    document = admin.get(link)
    assert document.status_code == 200, document.status_code
    schemas = document.json()["components"]["schemas"]
    (artifact,) = [s for s in schemas.values()
                   if {"group": a.GROUP, "version": "v1", "kind": "ModelArtifact"}
                   in s.get("x-kubernetes-group-version-kind", [])]  # fmt: skip
    spec = artifact["properties"]["spec"]
    ref = spec.get("$ref") or (spec.get("allOf") or [{}])[0].get("$ref")
    if ref:
        spec = schemas[ref.rsplit("/", 1)[-1]]
    assert "source" in spec["properties"]


@rule("openapi.explain", "kubectl explain describes the artifact's source and the node "
      "store's status")  # fmt: skip
def check_explain(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "modelartifacts.spec.source", f"--api-version={a.GROUP}/v1")
    assert "huggingFace" in out and "modelScope" in out
    out = kubectl.ok("explain", "nodemodelstores.status", f"--api-version={a.GROUP}/v1")
    assert "models" in out and "capacity" in out
