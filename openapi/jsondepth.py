"""How deep a JSON request body may nest, and the one measurement of it: the API server's bodies
(``apiserver/endpoints/body.py``) and the node plugin's (``nodeplugin/prefetchapi.py``) are
parsed by ``loads`` and refused past ``MAX_DEPTH`` with the same words.

The parser is orjson, which itself stops at 1024 levels (the standard library's recurses until
Python's stack gives out: a ``RecursionError``, not a refusal). The depth is then measured on the
body's brackets in C (``bracket_depth``), and a walk of the value only names the place of a
refusal. Errors are ``JsonError`` values carrying the message each server puts in its 400.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from openapi import fields

MAX_DEPTH = 64
"""Objects and lists nested deeper than this in a body get 400: far deeper than any object of
this API, well inside what the encoders (orjson: 255) and the validators handle."""


class JsonError(ValueError):
    """A body refused before anything looked at its content; ``message`` is the 400's."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TooDeep(JsonError):
    def __init__(self, max_depth: int, path: str = "") -> None:
        where = f" (at {fields.cut_path(path)})" if path else ""
        super().__init__(f"the request body is nested more than {max_depth} levels deep{where}")


def loads(body: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Any JSON value within ``max_depth`` (its size is the body's, bounded by the caller);
    ``JsonError`` (``TooDeep`` past the depth)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):  # orjson stops at 1024 levels
            raise TooDeep(max_depth) from exc
        raise JsonError(f"the request body is not valid JSON: {str(exc)[:200]}") from exc
    check(document, max_depth, body)
    return document


def check(value: Any, max_depth: int, source: bytes | None = None) -> None:
    """``TooDeep`` when ``value`` nests objects and lists deeper than ``max_depth``.

    ``source``, the JSON ``value`` was decoded from (or encodes to), lets the depth be measured
    on its brackets in C instead of walking ``value`` in Python; the walk then only names the
    place of a refusal."""
    if source is not None and source.count(b"[") + source.count(b"{") <= max_depth:
        return  # cannot be deeper than its brackets
    if source is not None and bracket_depth(source, max_depth) <= max_depth:
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise TooDeep(max_depth, deep_path(value, max_depth))
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_LEAF_PAIR = re.compile(rb"\{\}|\[\]")


def bracket_depth(source: bytes, limit: int) -> int:
    """The nesting depth of valid JSON ``source``, or ``limit + 1`` when it is deeper than
    ``limit``: its strings removed, then its brackets alone, peeled one level per pass (each
    pass removes every pair that was empty at its start). At most ``limit + 1`` passes, so a
    large, deep body costs no more than that many scans."""
    brackets = _JSON_STRING.sub(b"", source).translate(None, _NOT_BRACKETS)
    depth = 0
    while brackets and depth <= limit:
        brackets = _LEAF_PAIR.sub(b"", brackets)
        depth += 1
    return depth


def deep_path(value: Any, max_depth: int) -> str:
    """The path of the first value nested past ``max_depth`` (only once refusing)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if depth > max_depth:
            return path
        if isinstance(item, dict):
            stack.extend((child, f"{path}.{key}" if path else str(key), depth + 1)
                         for key, child in item.items() if isinstance(child, dict | list))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]", depth + 1)
                         for index, child in enumerate(item) if isinstance(child, dict | list))
    return ""
