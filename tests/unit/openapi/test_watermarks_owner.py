"""The low-below-high watermark rule has one owner, ``openapi.nodestore.watermarks_problem``:
admission, the node plugin's spec check, the worker's ConfigMap merge and the capped effective
watermarks ask it; a comparison of a low and a high watermark anywhere else fails here."""

from __future__ import annotations

import ast
import pathlib

from openapi import nodestore

REPO = pathlib.Path(__file__).resolve().parents[3]
PRODUCT = ("apiserver", "controllers", "nodeplugin", "openapi", "hub", "kube", "certs")
OWNER = REPO / "openapi" / "nodestore.py"
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _comparisons(path: pathlib.Path) -> list[str]:
    """Orderings of a low against a high in a module that speaks of watermarks."""
    text = path.read_text()
    if "watermark" not in text.lower():
        return []
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if not (isinstance(node, ast.Compare) and any(isinstance(op, ORDERING)
                                                      for op in node.ops)):
            continue
        sides = [ast.unparse(side).lower() for side in (node.left, *node.comparators)]
        if any("low" in side for side in sides) and any("high" in side for side in sides):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_second_copy_of_the_watermark_rule() -> None:
    scanned = [path for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))
               if path != OWNER and "/gen/" not in str(path)]
    assert len(scanned) > 100 and _comparisons(OWNER)  # it finds the rule where it is
    found = [line for path in scanned for line in _comparisons(path)]
    assert found == [], "ask openapi.nodestore.watermarks_problem:\n" + "\n".join(found)


def test_the_owner_says_low_must_be_below_high() -> None:
    assert nodestore.watermarks_problem(80, 79) == ""
    assert nodestore.watermarks_problem(80, 80) == "must be below highPercent (80)"
    assert nodestore.watermarks_problem(80, 95) != ""
    defaults = (nodestore.HIGH_PERCENT.default, nodestore.LOW_PERCENT.default)
    assert nodestore.watermarks_problem(*defaults) == ""
