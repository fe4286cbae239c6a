"""Bounded decoding: expanded size, depth, YAML normalization, the thread for large bodies."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from apiserver import errors
from apiserver.endpoints import body
from openapi import jsondepth

SMALL = body.Limits(max_bytes=1000, max_depth=5, inline_bytes=100)


def _laughs(levels: int) -> bytes:
    lines = ['l0: &l0 "lol"']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return ("\n".join(lines) + "\n").encode()


async def test_yaml_aliases_count_as_expanded() -> None:
    fine = await body.decode(_laughs(1), "application/yaml", SMALL)
    assert fine.document["l1"] == ["lol"] * 9
    with pytest.raises(errors.RequestEntityTooLarge, match="aliases expanded"):
        await body.decode(_laughs(3), "application/yaml", SMALL)  # 729 strings, ~4 KB
    with pytest.raises(errors.RequestEntityTooLarge):
        await body.decode(_laughs(30), "application/yaml")  # 9**30 under the real limit


async def test_aliases_become_a_tree_not_shared_objects() -> None:
    decoded = (await body.decode(b"a: &x {k: v}\nb: *x\n", "application/yaml")).document
    decoded["a"]["k"] = "changed"
    assert decoded["b"] == {"k": "v"}


async def test_recursive_aliases_and_deep_yaml_are_refused() -> None:
    with pytest.raises(errors.BadRequest, match="contains it"):
        await body.decode(b"a: &x [*x]\n", "application/yaml")
    with pytest.raises(errors.BadRequest, match="nested more than 5"):
        await body.decode(b"a: [[[[[[1]]]]]]\n", "application/yaml", SMALL)
    with pytest.raises(errors.BadRequest, match="nesting depth"):
        await body.decode(b"a: " + b"[" * 5000 + b"]" * 5000, "application/yaml")


@pytest.mark.parametrize(("text", "expected"), [
    (b"2: two\ntrue: yes\n", {"2": "two", "true": True}),
    (b"when: 2026-01-02T03:04:05Z\n", {"when": "2026-01-02T03:04:05+00:00"}),
    (b"day: 2026-01-02\n", {"day": "2026-01-02"}),
])
async def test_yaml_is_normalized_to_json(text: bytes, expected: dict[str, Any]) -> None:
    assert (await body.decode(text, "application/yaml")).document == expected


@pytest.mark.parametrize("text", [b"b: !!binary aGk=\n", b"s: !!set {a, b}\n",
                                  b"n: " + b"9" * 5000 + b"\n", b"a: 1\n---\nb: 2\n",
                                  b"- 1\n", b"a: [\n", b"\xff\xfe"])
async def test_yaml_json_cannot_carry_is_refused(text: bytes) -> None:
    with pytest.raises(errors.BadRequest):
        await body.decode(text, "application/yaml")


async def test_json_depth_is_bounded_and_the_path_named() -> None:
    assert (await body.decode(b'{"a":[[[1]]]}', "application/json", SMALL)).document
    with pytest.raises(errors.BadRequest, match=r"nested more than 5 levels deep \(at a\.b\[0\]"):
        await body.decode(b'{"a":{"b":[[[[1]]]]}}', "application/json", SMALL)
    with pytest.raises(errors.BadRequest, match="nested more than 64"):
        await body.decode(b"[" * 2000 + b"]" * 2000, "application/json")


async def test_large_bodies_and_yaml_decode_off_the_event_loop() -> None:
    offloaded: list[str] = []

    async def run(work: Callable[[], body.Decoded]) -> body.Decoded:
        offloaded.append(threading.current_thread().name)
        return await body.offload(work)

    small = json.dumps({"a": 1}).encode()
    large = json.dumps({"a": "x" * 200}).encode()
    assert (await body.decode(small, "application/json", SMALL, run=run)).document == {"a": 1}
    assert offloaded == []
    assert (await body.decode(large, "application/json", SMALL, run=run)).document["a"]
    assert (await body.decode(b"a: 1\n", "application/yaml", SMALL, run=run)).document
    assert len(offloaded) == 2
    # the default really runs in another thread
    names: list[str] = []

    def work() -> str:
        names.append(threading.current_thread().name)
        return "done"

    assert await body.offload(work) == "done"
    assert names != [threading.current_thread().name]


async def test_duplicates_are_found_in_the_thread_too() -> None:
    text = b'{"a":1,"a":2,"pad":"' + b"x" * 200 + b'"}'
    decoded = await body.decode(text, "application/json", SMALL, duplicates=True)
    assert decoded.duplicates == ["a"]


@pytest.mark.parametrize(("text", "repeated"), [
    (b'{"a":"x:y","a":"z"}', ["a"]),  # the dropped value held a colon
    (b'{"m":{"t":"2026-12-04T21:00:00Z","t":"1"},"k":"v"}', ["m.t"]),
    (b'{"a":"\\u003a","b":1,"b":2}', ["b"]),  # the escape makes the counts equal; still found
    (b'{"a":"\\u003a","b":1}', []),
    (b'{"url":"https://h:443/p","l":[{"x":":"},{"x":1}]}', []),
])
async def test_duplicates_are_found_whatever_the_colons(text: bytes, repeated: list[str]) -> None:
    decoded = await body.decode(text, "application/json", duplicates=True)
    assert decoded.duplicates == repeated
    assert decoded.duplicates == body.duplicate_fields(text)


def test_a_body_without_repeats_skips_the_second_parse() -> None:
    text = json.dumps({"metadata": {"name": "a", "creationTimestamp": "2026-12-04T21:00:00Z",
                                    "labels": {"x.io/y": "z"}},
                       "spec": {"l": [{"k": "v:w"}, 1, None]}}, indent=1).encode()
    assert not body.may_repeat(text, json.loads(text))
    assert body.may_repeat(b'{"a":1,"a":2}', {"a": 2})
    assert body.may_repeat(b'{"a":"\\u003a","b":1,"b":2}', {"a": ":", "b": 2})


def _tree_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_tree_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_tree_depth, value), default=0)
    return 0


def _random_document(rng: random.Random, depth: int) -> Any:
    tricky = ['"', "\\", "[", "]", "{", "}", '\\"', "\\\\[", "x", ":", ","]
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(["".join(rng.choices(tricky, k=rng.randint(0, 6))), 1, None, True])
    if rng.random() < 0.5:
        return [_random_document(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {"".join(rng.choices(tricky, k=rng.randint(0, 4))) + str(i):
            _random_document(rng, depth - 1) for i in range(rng.randint(0, 3))}


def test_depth_from_the_brackets_matches_a_walk_of_the_tree() -> None:
    rng = random.Random(24)
    for _ in range(2000):
        document = {"root": _random_document(rng, rng.randint(0, 12))}
        for text in (json.dumps(document).encode(), orjson.dumps(document)):
            depth = _tree_depth(document)
            assert jsondepth.bracket_depth(text, 64) == depth
            assert jsondepth.bracket_depth(text, depth - 1) == depth  # stops: limit + 1
            body.check_depth(document, depth, text)
            with pytest.raises(errors.BadRequest, match=f"nested more than {depth - 1} "):
                body.check_depth(document, depth - 1, text)


def test_a_large_deep_body_is_peeled_at_most_limit_plus_one_times() -> None:
    deep = b"[" * 1000 + b"]" * 1000
    text = b"[" + b",".join([deep] * 500) + b"]"  # 1 MB, 1,001 levels: orjson still takes it
    assert jsondepth.bracket_depth(text, 64) == 65  # one pass per level would count 1,001
    assert jsondepth.bracket_depth(text, 2000) == 1001
    with pytest.raises(errors.BadRequest, match="nested more than 64 levels deep"):
        body.json_document(text, body.DEFAULT)
