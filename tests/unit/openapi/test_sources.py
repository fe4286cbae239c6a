"""The source kinds have one owner: ``openapi/sources.py`` spells them, everyone imports them."""

from __future__ import annotations

import ast
import pathlib

from devkit import admitting as admission
from openapi import schema, sources

REPO = pathlib.Path(__file__).resolve().parents[3]
PRODUCT = ("apiserver", "controllers", "nodeplugin", "openapi", "hub", "kube", "certs")
OWNER = REPO / "openapi" / "sources.py"


def _literals(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in sources.KINDS]


def test_no_second_copy_of_a_source_kind_name() -> None:
    scanned = [path for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))
               if path != OWNER and "/gen/" not in str(path)]
    assert len(scanned) > 100 and len(_literals(OWNER)) >= len(sources.KINDS)  # it looks
    found = [f"{path.relative_to(REPO)}:{line}: {value!r}"
             for path in scanned for line, value in _literals(path)]
    assert found == [], "spell source kinds through openapi.sources:\n" + "\n".join(found)


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
