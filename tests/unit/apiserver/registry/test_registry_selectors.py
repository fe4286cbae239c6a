"""Label selector parsing and matching (set-based) and the field selector's known fields."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.registry import selectors

LABELS = {"env": "prod", "tier": "gold", "size": "7"}


@pytest.mark.parametrize(("text", "expected"), [
    ("", True),
    ("env=prod", True),
    ("env==prod", True),
    ("env!=prod", False),
    ("env!=dev", True),
    ("missing!=x", True),
    ("env in (dev, prod)", True),
    ("env in (dev)", False),
    ("env notin (dev,qa)", True),
    ("missing notin (a)", True),
    ("tier", True),
    ("!tier", False),
    ("!missing", True),
    ("env=prod,tier in (gold,silver),!missing", True),
    ("env=prod,tier=silver", False),
    ("size>5", True),
    ("size<5", False),
    ("example.com/team=x", False),
])
def test_matching(text: str, expected: bool) -> None:
    assert selectors.parse_labels(text).matches(LABELS) is expected


@pytest.mark.parametrize("text", ["env=", "a b", "env in dev", "=x", "env=a=b", "Bad Key=x",
                                  "size>big", "env in (a b)", "env=" + "v" * 64])
def test_syntax_errors_are_bad_requests(text: str) -> None:
    if text == "env=":  # an empty value is valid: it matches an empty label
        assert selectors.parse_labels(text).matches({"env": ""})
        return
    with pytest.raises(errors.BadRequest, match="unable to parse requirement"):
        selectors.parse_labels(text)


def test_field_selectors_know_name_and_namespace_only() -> None:
    parsed = selectors.parse_fields("metadata.name=a,metadata.namespace!=b")
    assert parsed.matches("c", "a") and not parsed.matches("b", "a")
    assert selectors.parse_fields("metadata.name==x").matches("", "x")
    with pytest.raises(errors.BadRequest) as unknown:
        selectors.parse_fields("spec.x=1")
    assert unknown.value.message == (
        '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"')
    with pytest.raises(errors.BadRequest, match="can't understand"):
        selectors.parse_fields("metadata.name")
