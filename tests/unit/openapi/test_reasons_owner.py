"""Condition types and the Resolved condition's reasons have one owner: ``openapi/reasons.py``."""

from __future__ import annotations

import ast
import pathlib

from openapi import reasons

REPO = pathlib.Path(__file__).resolve().parents[3]
OWNER = REPO / "openapi" / "reasons.py"
WORDS = frozenset((*reasons.RESOLVED_REASONS, *reasons.ARTIFACT_CONDITIONS, reasons.HEALTHY))


def _literals(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef |
                                ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in WORDS
            and id(node) not in docstrings]


def test_the_controllers_spell_no_reason_of_their_own() -> None:
    scanned = sorted((REPO / "controllers").rglob("*.py"))
    assert len(scanned) > 20 and _literals(OWNER)  # it looks where the words are
    found = [f"{path.relative_to(REPO)}:{line}: {value!r}"
             for path in scanned for line, value in _literals(path)]
    assert found == [], "take condition words from openapi.reasons:\n" + "\n".join(found)


def test_the_vocabulary_is_what_the_schema_serves() -> None:
    assert reasons.RESOLVED in reasons.RESOLVED_REASONS
    assert len(set(reasons.RESOLVED_REASONS)) == len(reasons.RESOLVED_REASONS)
    assert reasons.FailureReason.ACCESS_DENIED.value == reasons.ACCESS_DENIED
