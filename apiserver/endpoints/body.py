"""Decoding request bodies within bounds: size as expanded, nesting depth, and off the event loop.

Every JSON or YAML body becomes a plain JSON tree (dicts, lists, strings, numbers, booleans,
null) that is at most ``Limits.max_bytes`` long once encoded and at most ``Limits.max_depth``
levels deep, or the request is refused before anything looks at its content:

- JSON is parsed by orjson (which itself stops at 1024 levels), then its depth is checked.
- YAML is composed into a node graph first. Aliases make that graph a DAG whose expanded size can
  be exponential in the body's (a "billion laughs"), so the expanded size and depth are computed on
  the graph, each shared node once, and refused past the limits before a single value is
  constructed; a recursive alias is refused. libyaml refuses nesting past 1000 levels by itself.
  The constructed value is then normalized through JSON (keys become strings, timestamps RFC 3339
  strings; binary and set values are refused), which also turns the DAG into a tree.
- Bodies larger than ``Limits.inline_bytes``, and every YAML body, are decoded in a worker thread,
  so a slow body never holds the event loop; the JSON duplicate-key scan runs there too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import yaml

from apiserver import errors
from apiserver.flags import config
from openapi import jsondepth

JSON_TYPES = ("application/json", "*/*")
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
T = TypeVar("T")
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    max_bytes: int = config.MAX_BODY_BYTES
    """The largest object, as JSON once decoded (YAML aliases expanded)."""
    max_depth: int = config.MAX_BODY_DEPTH
    """The deepest nesting of objects and lists."""
    inline_bytes: int = 64 * 1024
    """JSON bodies up to this size are decoded on the event loop (a thread hop costs more)."""


DEFAULT = Limits()


@dataclasses.dataclass(frozen=True, slots=True)
class Decoded:
    document: dict[str, Any]
    duplicates: list[str]
    """Dotted paths of keys a JSON body repeats (when asked for)."""


def media_type(content_type: str) -> str:
    """The bare media type (parameters such as ``;charset=utf-8`` stripped)."""
    return content_type.split(";", 1)[0].strip().lower()


async def offload(work: Callable[[], T]) -> T:
    """Run ``work`` in a worker thread (the default way ``decode`` leaves the event loop)."""
    return await asyncio.to_thread(work)


async def decode(body: bytes, content_type: str, limits: Limits = DEFAULT, *,
                 duplicates: bool = False,
                 run: Callable[[Callable[[], Decoded]], Awaitable[Decoded]] = offload) -> Decoded:
    """A JSON (or YAML) object within ``limits``: 415 for other media types, 400 for a malformed
    or too deeply nested body, 413 for one larger than ``max_bytes`` once expanded."""
    kind = media_type(content_type) or "application/json"
    if kind not in JSON_TYPES and kind not in YAML_TYPES:
        raise errors.UnsupportedMediaType(
            f"the body of the request was in an unknown format - accepted media types"
            f" include: application/json, application/yaml (got {kind[:100]})")
    if kind in JSON_TYPES and len(body) <= limits.inline_bytes:
        return decode_now(body, kind, limits, duplicates=duplicates)
    return await run(functools.partial(decode_now, body, kind, limits, duplicates=duplicates))


def decode_now(body: bytes, kind: str, limits: Limits, *, duplicates: bool = False) -> Decoded:
    """``decode`` in the calling thread (``kind`` is a bare media type)."""
    if kind in YAML_TYPES:
        document = _yaml(body, limits)
        found: list[str] = []
    else:
        document = json_document(body, limits)
        found = duplicate_fields(body) if duplicates and may_repeat(body, document) else []
    if not isinstance(document, dict):
        raise errors.BadRequest("the request body must be a JSON object")
    return Decoded(document, found)


def json_document(body: bytes, limits: Limits) -> Any:
    """Any JSON value within the depth limit (its size is the body's, already bounded): the one
    rule the node plugin's bodies follow too (``openapi.jsondepth``)."""
    try:
        return jsondepth.loads(body, limits.max_depth)
    except jsondepth.JsonError as exc:
        raise errors.BadRequest(exc.message) from exc


def check_depth(value: Any, max_depth: int, source: bytes | None = None) -> None:
    """400 when ``value`` nests objects and lists deeper than ``max_depth``
    (``jsondepth.check``: ``source`` lets the depth be measured on its brackets)."""
    try:
        jsondepth.check(value, max_depth, source)
    except jsondepth.TooDeep as exc:
        raise errors.BadRequest(exc.message) from exc


def too_deep(max_depth: int, path: str = "") -> errors.BadRequest:
    return errors.BadRequest(jsondepth.TooDeep(max_depth, path).message)


def too_large(limit: int, what: str = "the decoded object") -> errors.RequestEntityTooLarge:
    return errors.RequestEntityTooLarge(
        f"Request entity too large: {what} is larger than the limit of {limit} bytes")


def body_too_large(limit: int) -> errors.RequestEntityTooLarge:
    """The 413 for a request body over ``limit`` as sent (kube-apiserver's words): the one
    writer of it, for the app's streaming limit and a handler's read alike."""
    return errors.RequestEntityTooLarge(f"Request entity too large: limit is {limit}")


def _yaml(body: bytes, limits: Limits) -> Any:
    loader = _LOADER(body)
    try:
        node = loader.get_single_node()
        if node is None:
            raise errors.BadRequest("the request body must be a JSON object")
        _measure(node, limits)
        value = loader.construct_document(node)
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise errors.BadRequest(f"the request body is not valid YAML: {str(exc)[:300]}") from exc
    finally:
        loader.dispose()
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        raise errors.BadRequest(
            f"the request body holds a YAML value JSON cannot carry: {str(exc)[:200]}") from exc
    if len(encoded) > limits.max_bytes:
        raise too_large(limits.max_bytes)
    return orjson.loads(encoded)


def _measure(root: yaml.Node, limits: Limits) -> None:
    """Refuse a node graph whose expansion is too large or too deep, or that contains itself.

    Post-order over the graph, each node measured once (an alias is the very node it names), so
    the cost is the body's size whatever the expansion. Sizes are a lower bound of the encoded
    JSON (a scalar, its quotes, a separator), capped so they stay small integers.
    """
    cap = limits.max_bytes + 1
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            children = _children(node)
            size = 2 + sum(sizes[id(child)] + 1 for child in children)
            depth = 1 + max((depths[id(child)] for child in children), default=0)
            if size > limits.max_bytes:
                raise too_large(limits.max_bytes, "the body, with its YAML aliases expanded,")
            if depth > limits.max_depth:
                raise too_deep(limits.max_depth)
            sizes[key], depths[key] = min(size, cap), depth
            active.discard(key)
            continue
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key], depths[key] = len(node.value) + 2, 0
            continue
        if key in active:
            raise errors.BadRequest("the request body is not valid YAML: an alias refers to a"
                                    " node that contains it")
        active.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def may_repeat(body: bytes, document: Any) -> bool:
    """False when ``body``, which decoded to ``document``, provably names no key twice in an
    object, so ``duplicate_fields`` (a second, slower parse) can be skipped.

    Every key in the body is followed by one colon; the other colons are inside strings. Without
    ``\\u`` escapes (``\\u003a`` is a colon that is not one in the body) the decoded strings hold
    at most the colons the body's strings hold, and orjson writes the decoded document with one
    colon per key kept and the strings' colons unescaped. So when both counts are equal the body
    has no more keys than the document kept: none repeated."""
    if b"\\u" in body:
        return True
    try:
        encoded = orjson.dumps(document)
    except orjson.JSONEncodeError:
        return True
    return body.count(b":") != encoded.count(b":")


def duplicate_fields(body: bytes) -> list[str]:
    """Dotted paths of keys a JSON body repeats (the last value wins when decoding).

    Runs only on bodies whose depth was checked, so the recursion here stays shallow."""
    found: dict[str, None] = {}  # insertion-ordered, and O(1) to ask

    def walk(value: Any, path: str) -> None:
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, item in value.pairs:
                here = f"{path}.{key}" if path else key
                if key in seen:
                    found[here] = None
                seen.add(key)
                walk(item, here)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    try:
        walk(json.loads(body, object_pairs_hook=_Pairs), "")
    except ValueError:
        return []
    return list(found)


class _Pairs:
    """A JSON object kept as its key/value pairs, duplicates included."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs
