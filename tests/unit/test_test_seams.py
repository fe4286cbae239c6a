"""The node plugin's, hub's, API server's and contract's tests reach their subjects through
constructor parameters, never by patching module attributes (``monkeypatch.setattr``,
``mock.patch``): a patched constant tests a configuration production cannot have, and hides the
seam production code should offer.
Environment variables stay fair game: the flags really read them."""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
TREES = ("tests/unit/nodeplugin", "tests/unit/hub", "tests/integration/nodeplugin",
         "tests/integration/hub", "tests/unit/apiserver", "tests/integration/apiserver",
         "tests/unit/openapi")
# Storage (issue 12) counts SQLite's group commits by wrapping logtable.transaction, a function
# of its own module rather than a setting; it keeps that one.
ALLOWED = {"tests/unit/apiserver/storage/test_sqlite.py"}


def _patches(tree: ast.Module) -> list[int]:
    found: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if not isinstance(func, ast.Attribute):
            continue
        owner = ast.unparse(func.value)
        if (func.attr in {"setattr", "delattr"} and owner == "monkeypatch") or (
            func.attr in {"patch", "object"} and "mock" in owner
        ):
            found.append(node.lineno)
    return found


def test_no_test_patches_a_module_or_an_object() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for top in TREES
        for path in sorted((REPO / top).rglob("*.py"))
        if str(path.relative_to(REPO)) not in ALLOWED
        for line in _patches(ast.parse(path.read_text(), filename=str(path)))
    ]
    assert offenders == []
