"""Merge patch per RFC 7386 (its appendix examples) and JSON patch application."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import errors
from apiserver.endpoints import patch


@pytest.mark.parametrize(("target", "change", "result"), [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_rfc7386_examples(target: dict[str, Any], change: dict[str, Any],
                          result: dict[str, Any]) -> None:
    assert patch.merge(target, change) == result


async def test_patcher_by_media_type() -> None:
    merged = await patch.patcher("application/merge-patch+json; charset=utf-8", b'{"x":{"y":1}}')
    assert merged({"x": {"z": 2}}) == {"x": {"y": 1, "z": 2}}
    json_patch = await patch.patcher(patch.JSON_PATCH, b'[{"op":"replace","path":"/x","value":3}]')
    assert json_patch({"x": 1}) == {"x": 3}
    with pytest.raises(errors.Invalid):
        json_patch({})
    with pytest.raises(errors.BadRequest):
        await patch.patcher(patch.MERGE_PATCH, b"[1]")
    mislabelled = await patch.patcher(patch.MERGE_PATCH, b'[{"op":"remove","path":"/x"}]')
    assert mislabelled({"x": 1, "y": 2}) == {"y": 2}
    with pytest.raises(errors.BadRequest):
        await patch.patcher(patch.JSON_PATCH, b"not json")
    with pytest.raises(errors.UnsupportedMediaType):
        await patch.patcher("application/strategic-merge-patch+json", b"{}")
