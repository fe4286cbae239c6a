"""docs/api.md carries the field tables rendered from the schema, so the docs cannot drift."""

import pathlib

import pytest

from openapi import reference
from openapi import schema as schemas

DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs" / "api.md"


@pytest.mark.parametrize("kind", sorted(schemas.KINDS))
def test_docs_hold_the_rendered_table(kind: str) -> None:
    assert reference.field_table(kind) in DOCS.read_text(encoding="utf-8"), (
        "docs/api.md is stale: paste the output of `python -m openapi.reference`")


def test_table_rows_cover_nested_fields_and_facts() -> None:
    table = reference.field_table("NodeModelStore")
    rows = table.splitlines()
    assert rows[0].startswith("| Field | Type | Required | Default |")
    assert all(row.count(" | ") == 5 for row in rows if row.startswith("| `"))
    assert "| `spec.watermarks.highPercent` | integer |  | `80` | min 2; max 95 |" in table
    assert "| `status.models[].digest` | string | yes |" in table
    assert "`status.models[].retryTime` | time |  |  | nullable |" in table
    artifact = reference.field_table("ModelArtifact")
    assert "| `spec.source.modelScope.revision` | string |  | `master` |" in artifact
    assert "metadata" not in artifact.split("\n", 2)[2]
