"""Bounded decoding: expanded size, depth, YAML normalization, the thread for large bodies."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from apiserver import errors
from apiserver.endpoints import body

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
