"""The source kinds have one owner: ``openapi/sources.py`` spells them, everyone imports them
(``test_wire_owners.py`` fails on a second copy); the owner is what the schema and admission
serve."""

from __future__ import annotations

from devkit import admitting as admission
from openapi import schema, sources


def test_the_owner_is_what_the_schema_and_admission_serve() -> None:
    spec = schema.MODEL_ARTIFACT_SPEC["properties"]["source"]["properties"]
    assert tuple(spec) == sources.KINDS
    for kind in sources.HUB_KINDS:
        assert spec[kind]["properties"]["revision"]["default"] == sources.DEFAULT_REVISIONS[kind]
    refused = admission.admit_create({"apiVersion": "worker.gpustack.ai/v1",
                                      "kind": "ModelArtifact", "metadata": {"name": "a"},
                                      "spec": {"source": {}}})
    assert any("set exactly one of huggingFace, modelScope, persistentVolumeClaim or image"
               in str(problem) for problem in refused), refused
    assert sources.hub_kind(sources.CLAIM) is None
    assert sources.hub_kind(sources.MODEL_SCOPE) == sources.MODEL_SCOPE
