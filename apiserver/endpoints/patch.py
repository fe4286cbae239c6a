"""PATCH bodies: JSON patch (RFC 6902) and JSON merge patch (RFC 7386); 415 for the rest."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jsonpatch
import orjson

from apiserver import errors
from apiserver.endpoints import request as requests

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
ACCEPTED = (JSON_PATCH, MERGE_PATCH)

Obj = dict[str, Any]


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
        + ", ".join(ACCEPTED))


def patcher(content_type: str, body: bytes) -> Callable[[Obj], Obj]:
    """A function applying the patch to the current object; raises on a malformed patch."""
    media = requests.media_type(content_type)
    if media not in ACCEPTED:
        raise unsupported()
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise errors.BadRequest(f"the patch is not valid JSON: {exc}") from exc
    if media == MERGE_PATCH and _looks_like_json_patch(document):
        # The Python client labels JSON patch operation lists as merge patches
        # (kubernetes-client/python#2119); as a merge patch a list could only replace the whole
        # object, which is never valid, so reading it as the operations meant loses nothing.
        media = JSON_PATCH
    if media == MERGE_PATCH:
        if not isinstance(document, dict):
            raise errors.BadRequest("a merge patch must be a JSON object")
        return lambda current: dict(merge(current, document))
    if not isinstance(document, list):
        raise errors.BadRequest("a JSON patch must be a list of operations")
    try:
        operations = jsonpatch.JsonPatch(document)
    except (jsonpatch.InvalidJsonPatch, TypeError) as exc:
        raise errors.BadRequest(f"the JSON patch is not valid: {exc}") from exc

    def apply(current: Obj) -> Obj:
        try:
            patched = operations.apply(current)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            message = f'the patch could not be applied: {exc}'
            raise errors.Invalid(message, details={"causes": [
                {"type": "FieldValueInvalid", "message": str(exc), "field": "patch"}]}) from exc
        if not isinstance(patched, dict):
            raise errors.BadRequest("the patched document is not a JSON object")
        return patched

    return apply
