"""The one JSON depth rule (the API server's bodies and the node plugin's)."""

from __future__ import annotations

import pytest

from openapi import jsondepth


def test_deep_bodies_are_refused_with_the_rule_not_a_recursion_error() -> None:
    inside = b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}"
    for body in (b"[" * 60_000, b"[" * 2000 + b"]" * 2000, inside):
        with pytest.raises(jsondepth.TooDeep, match="nested more than 64 levels deep"):
            jsondepth.loads(body)
    nested = jsondepth.loads(b"[" * 64 + b"]" * 64)
    depth = 0
    while isinstance(nested, list) and nested:
        nested, depth = nested[0], depth + 1
    assert depth == 63  # 64 levels: the innermost is the empty list


def test_the_place_of_a_refusal_is_named() -> None:
    with pytest.raises(jsondepth.TooDeep, match=r"\(at spec\.a\[0\]\)"):
        jsondepth.check({"spec": {"a": [[1]]}}, 3)


def test_what_is_not_json_is_a_json_error() -> None:
    for body in (b"NaN", b"[1,", b"\xff", b"", b"1" * 5000):
        with pytest.raises(jsondepth.JsonError, match="not valid JSON"):
            jsondepth.loads(body)
