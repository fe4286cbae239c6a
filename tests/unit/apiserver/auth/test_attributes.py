"""Request attributes: kube's request info, verb mapping and all (aggregator.md 2.2)."""

from __future__ import annotations

import pytest

from apiserver.auth import attributes
from apiserver.auth import user as users

ALICE = users.UserInfo("alice")
G = "/apis/worker.gpustack.ai/v1"


def _parse(method: str, path: str, query: str = "") -> attributes.Attributes:
    return attributes.parse(ALICE, method, path, query)


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "",
     ("list", "team-a", "modelartifacts", "", "")),
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "watch=true",
     ("watch", "team-a", "modelartifacts", "", "")),
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "watch=1",
     ("watch", "team-a", "modelartifacts", "", "")),
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "watch=false", ("list", "team-a",
                                                                     "modelartifacts", "", "")),
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "watch=0", ("list", "team-a",
                                                                 "modelartifacts", "", "")),
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "watch=yes", ("watch", "team-a",
                                                                   "modelartifacts", "", "")),
    ("GET", f"{G}/modelartifacts", "", ("list", "", "modelartifacts", "", "")),
    ("GET", f"{G}/namespaces/team-a/modelartifacts/qwen", "",
     ("get", "team-a", "modelartifacts", "", "qwen")),
    ("HEAD", f"{G}/namespaces/team-a/modelartifacts/qwen", "",
     ("get", "team-a", "modelartifacts", "", "qwen")),
    ("GET", f"{G}/namespaces/team-a/modelartifacts/qwen/progress", "",
     ("get", "team-a", "modelartifacts", "progress", "qwen")),
    ("PUT", f"{G}/namespaces/team-a/modelartifacts/qwen/status", "",
     ("update", "team-a", "modelartifacts", "status", "qwen")),
    ("PATCH", f"{G}/nodemodelstores/node-a/status", "",
     ("patch", "", "nodemodelstores", "status", "node-a")),
    ("POST", f"{G}/namespaces/team-a/modelartifacts", "",
     ("create", "team-a", "modelartifacts", "", "")),
    ("DELETE", f"{G}/namespaces/team-a/modelartifacts/qwen", "",
     ("delete", "team-a", "modelartifacts", "", "qwen")),
    ("DELETE", f"{G}/namespaces/team-a/modelartifacts", "",
     ("deletecollection", "team-a", "modelartifacts", "", "")),
    ("GET", f"{G}/nodemodelstores", "fieldSelector=metadata.name%3Dnode-a&watch=1",
     ("watch", "", "nodemodelstores", "", "node-a")),
    ("GET", f"{G}/nodemodelstores", "fieldSelector=metadata.name%3D%3Dnode-a",
     ("list", "", "nodemodelstores", "", "node-a")),
    ("GET", f"{G}/nodemodelstores", "fieldSelector=metadata.namespace%3Dx,metadata.name%3Dn",
     ("list", "", "nodemodelstores", "", "n")),
    ("GET", f"{G}/nodemodelstores", "fieldSelector=metadata.name%21%3Dnode-a",
     ("list", "", "nodemodelstores", "", "")),
    ("GET", f"{G}/nodemodelstores", "fieldSelector=metadata.name%3D..",
     ("list", "", "nodemodelstores", "", "")),
    ("GET", f"{G}/watch/namespaces/team-a/modelartifacts", "",
     ("watch", "team-a", "modelartifacts", "", "")),
])  # fmt: skip
def test_resource_requests(method: str, path: str, query: str,
                           expected: tuple[str, str, str, str, str]) -> None:
    found = _parse(method, path, query)
    assert found.resource_request
    assert (found.verb, found.namespace, found.resource, found.subresource,
            found.name) == expected
    assert (found.api_group, found.api_version) == ("worker.gpustack.ai", "v1")
    assert found.user is ALICE


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/apis"), ("GET", "/apis/worker.gpustack.ai"), ("GET", G), ("GET", "/openapi/v2"),
    ("GET", "/openapi/v3/apis/worker.gpustack.ai/v1"), ("GET", "/version"), ("GET", "/healthz"),
    ("POST", "/api"), ("GET", "/"), ("GET", "/apis/worker.gpustack.ai/v1/watch"),
])  # fmt: skip
def test_non_resource_requests_use_the_lowercase_method(method: str, path: str) -> None:
    found = _parse(method, path)
    assert not found.resource_request
    assert (found.verb, found.path) == (method.lower(), path)


def test_core_group_and_namespace_objects() -> None:
    pod = _parse("GET", "/api/v1/namespaces/ns/pods/p")
    assert (pod.api_group, pod.api_version, pod.namespace, pod.resource, pod.name) == (
        "", "v1", "ns", "pods", "p")
    namespace = _parse("GET", "/api/v1/namespaces/ns")
    assert (namespace.resource, namespace.name, namespace.namespace) == ("namespaces", "ns", "ns")
    status = _parse("PUT", "/api/v1/namespaces/ns/status")
    assert (status.resource, status.name, status.subresource) == ("namespaces", "ns", "status")
