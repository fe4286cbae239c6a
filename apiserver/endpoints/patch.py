"""PATCH bodies: JSON patch (RFC 6902) and JSON merge patch (RFC 7386); server-side apply is
``apply.py``'s; 415 for the rest (strategic merge among them).

What a patch may produce is bounded before anything looks at the result, as kube-apiserver
bounds it: at most ``MAX_OPERATIONS`` operations, ``copy`` operations adding at most
``Limits.max_bytes`` in all (413 past that, checked before each copy is made), and the patched
object itself at most ``Limits.max_bytes`` as JSON and ``Limits.max_depth`` deep. Messages name
the operation and its field and never echo a value.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import jsonpatch
import jsonpointer
import orjson

from apiserver import errors
from apiserver.endpoints import body as bodies
from openapi import wire

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
ACCEPTED = (JSON_PATCH, MERGE_PATCH)
MAX_OPERATIONS = 10_000
"""kube-apiserver's limit on the operations of one JSON patch."""
_OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")
_NEEDS_VALUE = ("add", "replace", "test")
_NEEDS_FROM = ("move", "copy")

Patcher = Callable[[wire.Obj], wire.Obj]


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def _looks_like_json_patch(document: Any) -> bool:
    return (isinstance(document, list) and bool(document)
            and all(isinstance(op, dict) and "op" in op and "path" in op for op in document))


def unsupported() -> errors.UnsupportedMediaType:
    return errors.UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join((*ACCEPTED, APPLY_PATCH)))


async def patcher(content_type: str, body: bytes,
                  limits: bodies.Limits = bodies.DEFAULT) -> Patcher:
    """A function applying the patch to the current object; raises on a malformed patch."""
    media = bodies.media_type(content_type)
    if media not in ACCEPTED:
        raise unsupported()
    if len(body) <= limits.inline_bytes:
        document = bodies.json_document(body, limits)
    else:
        document = await asyncio.to_thread(bodies.json_document, body, limits)
    if media == MERGE_PATCH and _looks_like_json_patch(document):
        # The Python client labels JSON patch operation lists as merge patches
        # (kubernetes-client/python#2119); as a merge patch a list could only replace the whole
        # object, which is never valid, so reading it as the operations meant loses nothing.
        media = JSON_PATCH
    if media == MERGE_PATCH:
        if not isinstance(document, dict):
            raise errors.BadRequest("a merge patch must be a JSON object")
        return lambda current: checked(dict(merge(current, document)), limits)
    operations = _operations(document)

    def apply(current: wire.Obj) -> wire.Obj:
        return checked(_apply(operations, current, limits), limits)

    return apply


def _operations(document: Any) -> list[dict[str, Any]]:
    """The operations of a JSON patch, each checked for shape (400 naming the field)."""
    if not isinstance(document, list):
        raise errors.BadRequest("a JSON patch must be a list of operations")
    if len(document) > MAX_OPERATIONS:
        raise errors.RequestEntityTooLarge(
            f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got"
            f" {len(document)}")
    for index, operation in enumerate(document):
        where = f"the JSON patch is not valid: operation {index}"
        if not isinstance(operation, dict):
            raise errors.BadRequest(f"{where} must be an object")
        op = operation.get("op")
        if op not in _OPERATIONS:
            raise errors.BadRequest(
                f"{where}: op must be one of {', '.join(_OPERATIONS)}")
        for key in ("path", *(("from",) if op in _NEEDS_FROM else ())):
            pointer = operation.get(key)
            if not isinstance(pointer, str):
                raise errors.BadRequest(f"{where}: {key} must be a string (a JSON pointer)")
            if pointer and not pointer.startswith("/"):
                raise errors.BadRequest(
                    f"{where}: {key} must be a JSON pointer, empty or starting with '/'")
        if op in _NEEDS_VALUE and "value" not in operation:
            raise errors.BadRequest(f"{where}: {op} needs a value")
    return document


def _apply(operations: list[dict[str, Any]], current: wire.Obj, limits: bodies.Limits) -> Any:
    """Apply the operations one by one, charging each copy against the copy budget first."""
    copied = 0
    document: Any = current
    for index, operation in enumerate(operations):
        try:
            if operation["op"] == "copy":
                source = jsonpointer.resolve_pointer(document, operation["from"])
                copied += _encoded_size(source, limits.max_bytes - copied + 1)
                if copied > limits.max_bytes:
                    raise errors.RequestEntityTooLarge(
                        "Request entity too large: the copy operations of the JSON patch add"
                        f" more than the limit of {limits.max_bytes} bytes")
            document = jsonpatch.JsonPatch([operation]).apply(document, in_place=True)
        except jsonpatch.JsonPatchTestFailed:
            raise _failed(index, operation, "the value at path is not the tested value") from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, KeyError,
                IndexError, TypeError, ValueError) as exc:
            raise _failed(index, operation, str(exc)) from None
    return document


def _failed(index: int, operation: dict[str, Any], why: str) -> errors.Invalid:
    path = operation.get("path", "")
    message = (f"the JSON patch could not be applied: operation {index} ({operation['op']}"
               f" {path[:200]!r}): {why[:200]}")
    return errors.Invalid(message, details={"causes": [
        {"reason": "FieldValueInvalid", "message": message, "field": "patch"}]})


def _encoded_size(value: Any, budget: int) -> int:
    """Roughly the JSON size of ``value``, counting no further than ``budget``."""
    total = 0
    stack = [value]
    while stack and total < budget:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2
            for key, child in item.items():
                total += len(key) + 4
                stack.append(child)
        elif isinstance(item, list):
            total += 2 + len(item)
            stack.extend(item)
        elif isinstance(item, str):
            total += len(item) + 2
        else:
            total += 5
    return total


def checked(patched: Any, limits: bodies.Limits) -> wire.Obj:
    """The patched document, refused unless it is an object within the size and depth limits."""
    if not isinstance(patched, dict):
        raise errors.BadRequest("the patched document is not a JSON object")
    try:
        encoded = orjson.dumps(patched)
    except orjson.JSONEncodeError:  # nested past orjson's own limit (255)
        bodies.check_depth(patched, limits.max_depth)
        raise errors.BadRequest("the patched document cannot be encoded as JSON") from None
    bodies.check_depth(patched, limits.max_depth, encoded)
    if len(encoded) > limits.max_bytes:
        raise bodies.too_large(limits.max_bytes, "the patched object")
    return patched
