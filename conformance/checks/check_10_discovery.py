"""Discovery: the group, the legacy resource list and aggregated discovery v2."""

from __future__ import annotations

from typing import Any

from conformance import api as a
from conformance.api import Api
from conformance.kubectl import Kubectl
from conformance.rules import rule

RESOURCES = {
    "modelartifacts": (True, ["create", "delete", "get", "list", "patch", "update", "watch"]),
    "modelartifacts/progress": (True, ["get"]),
    "modelartifacts/copies": (True, ["get"]),
    "modelartifacts/manifest": (True, ["get"]),
    "nodemodelstores": (False, ["delete", "get", "list", "watch"]),
    "nodemodelstores/status": (False, ["get", "patch", "update"]),
    "modelprefetches": (True, ["create", "delete", "get", "list", "patch", "update", "watch"]),
    "modelstores": (False, ["create", "delete", "get", "list", "patch", "update", "watch"]),
    "modelstorebindings": (True, ["create", "delete", "get", "list", "patch", "update", "watch"]),
}


@rule("discovery.group", "GET /apis/worker.gpustack.ai is an APIGroup preferring v1")
def check_group(admin: Api) -> None:
    response = admin.get(f"/apis/{a.GROUP}")
    assert response.status_code == 200, response.text[:300]
    body = response.json()
    assert body["kind"] == "APIGroup" and body["name"] == a.GROUP
    assert body["preferredVersion"]["groupVersion"] == f"{a.GROUP}/v1"
    assert {"groupVersion": f"{a.GROUP}/v1", "version": "v1"} in body["versions"]


@rule("discovery.legacy", "GET /apis/worker.gpustack.ai/v1 lists exactly the served resources, "
      "their scope and verbs, short names and category")  # fmt: skip
def check_legacy(admin: Api) -> None:
    response = admin.get(a.GV)
    assert response.status_code == 200, response.text[:300]
    body = response.json()
    assert body["kind"] == "APIResourceList" and body["groupVersion"] == f"{a.GROUP}/v1"
    served = {r["name"]: r for r in body["resources"]}
    assert set(served) == set(RESOURCES)
    for name, (namespaced, verbs) in RESOURCES.items():
        assert served[name]["namespaced"] is namespaced, name
        assert sorted(served[name]["verbs"]) == verbs, name
    assert served["modelartifacts"]["kind"] == "ModelArtifact"
    assert served["nodemodelstores"]["kind"] == "NodeModelStore"
    assert "mart" in served["modelartifacts"].get("shortNames", [])
    assert served["nodemodelstores"].get("shortNames") == ["nms"]
    assert served["modelprefetches"]["kind"] == "ModelPrefetch"
    assert served["modelprefetches"].get("shortNames") == ["mpf"]
    assert served["modelstores"].get("shortNames") == ["ms"]
    assert served["modelstorebindings"].get("shortNames") == ["msb"]
    for name in ("modelartifacts", "nodemodelstores", "modelprefetches", "modelstores",
                 "modelstorebindings"):
        assert "gpustack" in served[name].get("categories", []), name


def _group(body: dict[str, Any]) -> dict[str, Any]:
    found = [item for item in body["items"] if item["metadata"]["name"] == a.GROUP]
    assert len(found) == 1, "worker.gpustack.ai missing from aggregated discovery"
    group: dict[str, Any] = found[0]
    return group


@rule("discovery.aggregated", "GET /apis with the v2 Accept answers APIGroupDiscoveryList naming "
      "both resources and their subresources, with an ETag honoured by If-None-Match")  # fmt: skip
def check_aggregated(admin: Api) -> None:
    response = admin.get("/apis", accept=a.DISCOVERY_V2)
    assert response.status_code == 200, response.text[:300]
    assert "as=APIGroupDiscoveryList" in response.headers["content-type"]
    assert "v=v2" in response.headers["content-type"]
    (version,) = [v for v in _group(response.json())["versions"] if v["version"] == "v1"]
    resources = {r["resource"]: r for r in version["resources"]}
    assert {"modelartifacts", "nodemodelstores"} <= set(resources)
    assert resources["modelartifacts"]["scope"] == "Namespaced"
    assert resources["nodemodelstores"]["scope"] == "Cluster"
    subresources = {s["subresource"] for s in resources["modelartifacts"].get("subresources", [])}
    assert "progress" in subresources
    subresources = {s["subresource"] for s in resources["nodemodelstores"].get("subresources", [])}
    assert "status" in subresources
    etag = response.headers.get("etag")
    assert etag, "no ETag on aggregated discovery"
    again = admin.get("/apis", accept=a.DISCOVERY_V2, headers={"If-None-Match": etag})
    assert again.status_code == 304, again.status_code


@rule("discovery.kubectl", "kubectl api-resources lists both kinds with their short names")
def check_kubectl_api_resources(kubectl: Kubectl) -> None:
    out = kubectl.ok("api-resources", f"--api-group={a.GROUP}", "--no-headers")
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert "mart" in rows["modelartifacts"] and "nms" in rows["nodemodelstores"]
