"""Merge patch per RFC 7386 (its appendix examples) and JSON patch application."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver import errors
from apiserver.endpoints import body as bodies
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


LIMITS = bodies.Limits(max_bytes=1000, max_depth=6)


async def test_copies_are_charged_before_they_are_made() -> None:
    ops: list[Any] = [{"op": "add", "path": "/a", "value": "x" * 300}]
    ops += [{"op": "copy", "from": "/a", "path": "/b"}, {"op": "remove", "path": "/b"}] * 3
    within = await patch.patcher(patch.JSON_PATCH, json.dumps(ops).encode(), LIMITS)
    assert within({}) == {"a": "x" * 300}  # ~900 bytes copied, the result stays small
    ops.append({"op": "copy", "from": "/a", "path": "/b"})  # a fourth copy passes the budget
    beyond = await patch.patcher(patch.JSON_PATCH, json.dumps(ops).encode(), LIMITS)
    with pytest.raises(errors.RequestEntityTooLarge, match="copy operations"):
        beyond({})


async def test_operation_count_and_shape() -> None:
    many = [{"op": "test", "path": "/a", "value": 1}] * (patch.MAX_OPERATIONS + 1)
    with pytest.raises(errors.RequestEntityTooLarge, match="maximum operations"):
        await patch.patcher(patch.JSON_PATCH, json.dumps(many).encode())
    for op in ({"op": "add", "path": "a", "value": 1}, {"op": "move", "path": "/a"},
               {"op": "nope", "path": "/a"}, {"op": "replace", "path": "/a"}, 7):
        with pytest.raises(errors.BadRequest, match="operation 0"):
            await patch.patcher(patch.JSON_PATCH, json.dumps([op]).encode())


async def test_the_result_is_bounded_before_anyone_reads_it() -> None:
    grow = await patch.patcher(patch.MERGE_PATCH, json.dumps({"a": "x" * 600}).encode(), LIMITS)
    with pytest.raises(errors.RequestEntityTooLarge, match="patched object"):
        grow({"b": "y" * 600})
    deep = [{"op": "add", "path": "/a/b/c", "value": [[[[1]]]]}]
    nest = await patch.patcher(patch.JSON_PATCH, json.dumps(deep).encode(), LIMITS)
    with pytest.raises(errors.BadRequest, match="nested more than 6"):
        nest({"a": {"b": {}}})
    replaced = await patch.patcher(patch.JSON_PATCH, b'[{"op":"replace","path":"","value":1}]')
    with pytest.raises(errors.BadRequest, match="not a JSON object"):
        replaced({})


async def test_failures_name_the_operation_and_never_echo_a_value() -> None:
    secret = "s" * 10_000
    ops = [{"op": "test", "path": "/a", "value": secret}]
    failing = await patch.patcher(patch.JSON_PATCH, json.dumps(ops).encode())
    with pytest.raises(errors.Invalid) as caught:
        failing({"a": "other" * 1000})
    assert "operation 0 (test '/a')" in caught.value.message
    assert secret[:50] not in caught.value.message and len(caught.value.message) < 500
    missing = await patch.patcher(patch.JSON_PATCH, b'[{"op":"remove","path":"/x/y"}]')
    with pytest.raises(errors.Invalid, match="operation 0"):
        missing({"a": "b" * 100_000})
