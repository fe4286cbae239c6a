"""get/list/create/update/patch/delete of the served kinds, answered like kube-apiserver."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import orjson

from devkit.controlplane import selectors, status
from devkit.controlplane.requestinfo import RequestInfo
from devkit.controlplane.resources import Kind
from devkit.controlplane.store import Store, continue_token, parse_continue
from openapi import wire

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclasses.dataclass(frozen=True)
class Call:
    info: RequestInfo
    kind: Kind
    method: str
    query: Mapping[str, str]
    body: bytes
    content_type: str


def _decode(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise status.StatusError(
            status.bad_request(f"error decoding request body: {str(exc)[:120]}")
        ) from None


def _object(body: bytes) -> wire.Obj:
    obj = _decode(body)
    if not isinstance(obj, dict):
        raise status.StatusError(status.bad_request("the request body is not a JSON object"))
    return obj


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def matcher(call: Call) -> Callable[[wire.Obj], bool]:
    labels = selectors.labels(call.query.get("labelSelector"))
    fields = selectors.fields(call.query.get("fieldSelector"), call.kind)

    def match(obj: wire.Obj) -> bool:
        return labels(obj.get("metadata", {}).get("labels") or {}) and fields.matches(obj)

    return match


def list_objects(store: Store, call: Call) -> dict[str, Any]:
    kind = call.kind
    match = matcher(call)
    items, revision = store.list(kind, call.info.namespace, match)
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    token = call.query.get("continue")
    if token:
        _, after = parse_continue(token)
        items = [i for i in items if _key(i) > after]
    limit_text = call.query.get("limit", "")
    if limit_text.isdigit() and 0 < int(limit_text) < len(items):
        limit = int(limit_text)
        rest = len(items) - limit
        items = items[:limit]
        meta["continue"] = continue_token(revision, _key(items[-1]))
        if not call.query.get("labelSelector") and not call.query.get("fieldSelector"):
            meta["remainingItemCount"] = rest
    for item in items:
        item.pop("apiVersion", None)
        item.pop("kind", None)
    return {
        "kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta, "items": items,
    }  # fmt: skip


def _key(obj: wire.Obj) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def create(store: Store, call: Call) -> tuple[int, wire.Obj]:
    obj = _object(call.body)
    meta = obj.get("metadata") or {}
    namespace = call.info.namespace
    if call.kind.namespaced and meta.get("namespace") not in (None, "", namespace):
        raise status.StatusError(status.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        ))  # fmt: skip
    if call.query.get("dryRun") == "All":
        return 201, obj
    return 201, store.create(call.kind, namespace if call.kind.namespaced else "", obj)


def replace(store: Store, call: Call) -> wire.Obj:
    obj = _object(call.body)
    namespace = call.info.namespace if call.kind.namespaced else ""
    return store.update(
        call.kind, namespace, call.info.name, obj, subresource=call.info.subresource
    )


def patch(store: Store, call: Call) -> wire.Obj:
    content_type = call.content_type.split(";", 1)[0].strip()
    document = _decode(call.body)
    if content_type in (MERGE, STRATEGIC):
        # Strategic merge is applied as a JSON merge patch: lists are replaced whole.
        if not isinstance(document, dict):
            raise status.StatusError(status.bad_request("a merge patch must be a JSON object"))

        def mutate(current: wire.Obj) -> wire.Obj:
            patched: wire.Obj = merge_patch(current, document)
            return patched
    elif content_type == JSON_PATCH:
        if not isinstance(document, list):
            raise status.StatusError(status.bad_request("a JSON patch must be a JSON array"))

        def mutate(current: wire.Obj) -> wire.Obj:
            try:
                patched: wire.Obj = jsonpatch.apply_patch(current, document)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise status.StatusError(
                    status.status(422, "Invalid", f"the server rejected our request due to an "
                                  f"error in our request: {str(exc)[:120]}")
                ) from None
            return patched
    else:
        raise status.StatusError(status.unsupported_patch())
    namespace = call.info.namespace if call.kind.namespaced else ""
    return store.update(
        call.kind, namespace, call.info.name, {}, subresource=call.info.subresource, mutate=mutate
    )


def delete(store: Store, call: Call) -> wire.Obj:
    options: dict[str, Any] = {}
    if call.body.strip():
        decoded = _object(call.body)
        options = decoded
    preconditions = options.get("preconditions")
    namespace = call.info.namespace if call.kind.namespaced else ""
    obj, gone = store.delete(
        call.kind, namespace, call.info.name,
        preconditions if isinstance(preconditions, dict) else None,
    )  # fmt: skip
    if call.kind.returns_deleted or not gone:
        return obj
    return status.success(
        call.info.name, call.kind.group, call.kind.plural, str(obj["metadata"].get("uid", ""))
    )


def delete_collection(store: Store, call: Call) -> wire.Obj:
    items, _ = store.list(call.kind, call.info.namespace, matcher(call))
    deleted = []
    for item in items:
        meta = item["metadata"]
        obj, _gone = store.delete(call.kind, str(meta.get("namespace", "")), str(meta["name"]))
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        deleted.append(obj)
    return {
        "kind": call.kind.list_kind,
        "apiVersion": call.kind.api_version,
        "metadata": {"resourceVersion": str(store.revision)},
        "items": deleted,
    }
