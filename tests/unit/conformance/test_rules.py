"""Every check names a rule, rule ids are unique, and docs/conformance.md lists each one."""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[3]
CHECKS = REPO / "conformance" / "checks"


def _rules() -> dict[str, str]:
    """rule id -> check function, read from the check modules' decorators."""
    found: dict[str, str] = {}
    for path in sorted(CHECKS.glob("check_*.py")):
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("check_")):
                continue
            ids = [d.args[0].value for d in node.decorator_list
                   if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "rule"
                   and isinstance(d.args[0], ast.Constant)]  # fmt: skip
            assert len(ids) == 1, f"{path.name}:{node.name} names no rule"
            assert ids[0] not in found, f"rule {ids[0]} used twice"
            found[str(ids[0])] = node.name
    return found


def test_every_check_names_one_unique_rule() -> None:
    assert len(_rules()) >= 35


def test_every_rule_is_documented() -> None:
    doc = (REPO / "docs" / "conformance.md").read_text()
    missing = [rule for rule in _rules() if f"| `{rule}` |" not in doc]
    assert missing == []
