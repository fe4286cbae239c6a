"""Validation refusals: 422 Invalid with causes naming the fields, bounded messages."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx

from conformance import api as a
from conformance.api import Api
from conformance.fixtures import Run
from conformance.rules import rule


def _create(run: Run, admin: Api, name: str, **spec: Any) -> httpx.Response:
    run.ensure_namespaces()
    response = admin.post(a.artifacts(run.namespace), run.artifact_body(name, **spec))
    if response.status_code == 201:
        run.track(run.namespace, name)
    return response


def _fields(response: httpx.Response) -> list[str]:
    assert response.status_code == 422, (response.status_code, response.text[:300])
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    return [cause.get("field", "") for cause in body["details"]["causes"]]


@rule("validation.one-source", "two sources are refused 422 naming spec.source")
def check_two_sources(conformance_run: Run, admin: Api) -> None:
    source = {"huggingFace": {"repository": "a/b"}, "modelScope": {"repository": "c/d"}}
    fields = _fields(_create(conformance_run, admin, "invalid-two", source=source))
    assert any(f.startswith("spec.source") for f in fields), fields


@rule("validation.source-required", "no source is refused 422 naming spec.source")
def check_no_source(conformance_run: Run, admin: Api) -> None:
    assert "spec.source" in _fields(_create(conformance_run, admin, "invalid-none", source={}))


@rule("validation.expected-digest", "a malformed expectedDigest is refused 422 naming it")
def check_digest(conformance_run: Run, admin: Api) -> None:
    response = _create(conformance_run, admin, "invalid-digest", expectedDigest="md5:abc")
    assert "spec.expectedDigest" in _fields(response)


@rule("validation.pattern-limit", "more than 32 allowPatterns are refused 422 naming them")
def check_patterns(conformance_run: Run, admin: Api) -> None:
    patterns = [f"dir{i}/*" for i in range(33)]
    fields = _fields(_create(conformance_run, admin, "invalid-patterns", allowPatterns=patterns))
    assert any(f.startswith("spec.allowPatterns") for f in fields), fields


@rule("validation.prefetch-targets", "a ModelPrefetch without bindingRef is refused 422 naming "
      "spec.bindingRef; placement.instanceTypes is refused naming it")  # fmt: skip
def check_prefetch_targets(conformance_run: Run, admin: Api) -> None:
    conformance_run.ensure_namespaces()
    namespace = conformance_run.namespace
    body: dict[str, Any] = {
        "apiVersion": f"{a.GROUP}/{a.VERSION}", "kind": "ModelPrefetch",
        "metadata": {"name": "conformance-prefetch", "namespace": namespace},
        "spec": {"artifactRef": {"name": "conformance-absent"}}}
    assert "spec.bindingRef" in _fields(admin.post(a.prefetches(namespace), body))
    body["spec"]["bindingRef"] = {"name": "conformance-absent"}
    body["spec"]["placement"] = {"instanceTypes": ["conformance"]}
    assert "spec.placement.instanceTypes" in _fields(admin.post(a.prefetches(namespace), body))


@rule("validation.name", "an invalid object name is refused 422 naming metadata.name")
def check_name(conformance_run: Run, admin: Api) -> None:
    assert "metadata.name" in _fields(_create(conformance_run, admin, "Not_A_Name"))


@rule("validation.strict-fields", "fieldValidation=Strict refuses an unknown field with 400 "
      "naming it")  # fmt: skip
def check_strict(conformance_run: Run, admin: Api) -> None:
    conformance_run.ensure_namespaces()
    body = conformance_run.artifact_body("invalid-strict")
    body["spec"]["bogusField"] = 1
    response = admin.post(a.artifacts(conformance_run.namespace), body,
                          params={"fieldValidation": "Strict"})  # fmt: skip
    if response.status_code == 201:
        conformance_run.track(conformance_run.namespace, "invalid-strict")
    assert response.status_code == 400, response.text[:300]
    assert "bogusField" in response.json()["message"]


@rule("validation.bounded-message", "a refusal of a huge value does not echo it (message under "
      "4 KiB)")  # fmt: skip
def check_bounded(conformance_run: Run, admin: Api) -> None:
    huge = "x" * 100_000
    response = _create(conformance_run, admin, "invalid-huge",
                       source={"huggingFace": {"repository": huge}})  # fmt: skip
    assert 400 <= response.status_code < 500, response.status_code
    assert len(response.json()["message"]) < 4096
