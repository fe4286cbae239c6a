"""The OpenAPI documents served at ``/openapi/v2`` and ``/openapi/v3/apis/worker.gpustack.ai/v1``.

Both are rendered from one operation table built from ``resources`` and the schemas of ``schema``.
What kubectl relies on (docs/api.md, "OpenAPI documents"): exact paths, an object-valued
``x-kubernetes-group-version-kind`` on operations and a list-valued one on component schemas, a
``fieldValidation`` query parameter on every PATCH (so kubectl validates server-side), and PATCH
bodies of JSON patch, merge patch and server-side apply, never strategic merge (so client-side
apply sends merge patches).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from openapi import meta, resources
from openapi import schema as schemas

PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/apply-patch+yaml")
_BASE = f"/apis/{resources.GROUP}/{resources.VERSION}"
_TAG = "workerGpustackAi_v1"
_GROUP_CAMEL = "WorkerGpustackAiV1"

# name -> (in, type, description)
_PARAMETERS: dict[str, tuple[str, str, str]] = {
    "namespace": ("path", "string", "The object's namespace."),
    "name": ("path", "string", "The object's name."),
    "pretty": ("query", "string", "If 'true', indent the output."),
    "dryRun": ("query", "string", "All: check and answer the request without persisting it."),
    "fieldManager": ("query", "string", "The name of the actor making the change."),
    "force": ("query", "boolean",
              "Apply patches only: take the fields other managers own that conflict."),
    "fieldValidation": ("query", "string",
                        "What to do with unknown or duplicate fields: Ignore drops them, Warn "
                        "(the default) drops them and answers a Warning header, Strict refuses "
                        "the request."),
    "allowWatchBookmarks": ("query", "boolean", "Ask for BOOKMARK events on a watch."),
    "continue": ("query", "string", "The token of the next page, from a previous list."),
    "fieldSelector": ("query", "string", "Select by metadata.name or metadata.namespace."),
    "labelSelector": ("query", "string", "Select by labels (set-based syntax)."),
    "limit": ("query", "integer", "The most items to return; the rest come with continue."),
    "resourceVersion": ("query", "string", "Read at or after this version (see the API docs)."),
    "resourceVersionMatch": ("query", "string", "NotOlderThan or Exact."),
    "sendInitialEvents": ("query", "boolean",
                          "Start a watch with the current objects, then a bookmark."),
    "timeoutSeconds": ("query", "integer", "End the list or watch after this many seconds."),
    "watch": ("query", "boolean", "Stream changes instead of answering a list."),
    "gracePeriodSeconds": ("query", "integer", "Seconds before the object is deleted."),
    "orphanDependents": ("query", "boolean", "Deprecated: use propagationPolicy."),
    "propagationPolicy": ("query", "string", "Orphan, Background or Foreground."),
}
_LIST_QUERY = ("pretty", "allowWatchBookmarks", "continue", "fieldSelector", "labelSelector",
               "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents",
               "timeoutSeconds", "watch")
_WRITE_QUERY = ("pretty", "dryRun", "fieldManager", "fieldValidation")
_PATCH_QUERY = (*_WRITE_QUERY, "force")
_DELETE_QUERY = ("pretty", "dryRun", "gracePeriodSeconds", "orphanDependents",
                 "propagationPolicy")


@dataclasses.dataclass(frozen=True, slots=True)
class Operation:
    method: str
    action: str
    operation_id: str
    description: str
    kind: str
    query: tuple[str, ...]
    body: str | None  # a definition name, or None
    consumes: tuple[str, ...]
    responses: tuple[tuple[str, str], ...]  # (code, definition name)


@dataclasses.dataclass(frozen=True, slots=True)
class Path:
    url: str
    path_params: tuple[str, ...]
    operations: tuple[Operation, ...]


def _name(kind: str) -> str:
    return schemas.definition_name(kind)


def _paths_for(info: resources.ResourceInfo) -> list[Path]:
    scope = "Namespaced" if info.namespaced else ""
    prefix = f"{_BASE}/namespaces/{{namespace}}" if info.namespaced else _BASE
    ns_params: tuple[str, ...] = ("namespace",) if info.namespaced else ()
    kind, list_kind = info.kind, info.list_kind
    verbs = set(info.verbs)

    def op(method: str, action: str, verb: str, description: str, *, sub: str = "",
           query: tuple[str, ...] = (), body: str | None = None,
           consumes: tuple[str, ...] = ("*/*",), responses: tuple[tuple[str, str], ...] = (),
           op_kind: str = kind) -> Operation:
        op_id = f"{verb}{_GROUP_CAMEL}{scope}{kind}{sub}"
        return Operation(method, action, op_id, description, op_kind, query, body, consumes,
                         responses)

    paths: list[Path] = []
    collection: list[Operation] = []
    if "list" in verbs:
        collection.append(op("get", "list", "list", f"List or watch {info.plural}.",
                             query=_LIST_QUERY, responses=(("200", _name(list_kind)),)))
    if "create" in verbs:
        collection.append(op("post", "post", "create", f"Create a {kind}.", query=_WRITE_QUERY,
                             body=_name(kind),
                             responses=(("200", _name(kind)), ("201", _name(kind)),
                                        ("202", _name(kind)))))
    paths.append(Path(f"{prefix}/{info.plural}", ns_params, tuple(collection)))
    if info.namespaced and "list" in verbs:
        every = Operation("get", "list", f"list{_GROUP_CAMEL}{kind}ForAllNamespaces",
                          f"List or watch {info.plural} in every namespace.", kind, _LIST_QUERY,
                          None, ("*/*",), (("200", _name(list_kind)),))
        paths.append(Path(f"{_BASE}/{info.plural}", (), (every,)))

    item: list[Operation] = []
    if "get" in verbs:
        item.append(op("get", "get", "read", f"Read a {kind}.", query=("pretty",),
                       responses=(("200", _name(kind)),)))
    if "update" in verbs:
        item.append(op("put", "put", "replace", f"Replace a {kind}.", query=_WRITE_QUERY,
                       body=_name(kind), responses=(("200", _name(kind)), ("201", _name(kind)))))
    if "patch" in verbs:
        item.append(op("patch", "patch", "patch", f"Patch a {kind}.", query=_PATCH_QUERY,
                       body=meta.PATCH, consumes=PATCH_TYPES,
                       responses=(("200", _name(kind)), ("201", _name(kind)))))
    if "delete" in verbs:
        item.append(op("delete", "delete", "delete", f"Delete a {kind}.", query=_DELETE_QUERY,
                       body=meta.DELETE_OPTIONS,
                       responses=(("200", meta.STATUS), ("202", meta.STATUS))))
    paths.append(Path(f"{prefix}/{info.plural}/{{name}}", (*ns_params, "name"), tuple(item)))

    for sub in info.subresources:
        camel = sub.name[0].upper() + sub.name[1:]
        sub_ops: list[Operation] = []
        if "get" in sub.verbs:
            sub_ops.append(op("get", "get", "read", f"Read the {sub.name} of a {kind}.",
                              sub=camel, query=("pretty",), op_kind=sub.kind,
                              responses=(("200", _name(sub.kind)),)))
        if "update" in sub.verbs:
            sub_ops.append(op("put", "put", "replace", f"Replace the status of a {kind}.",
                              sub=camel, query=_WRITE_QUERY, body=_name(kind),
                              responses=(("200", _name(kind)), ("201", _name(kind)))))
        if "patch" in sub.verbs:
            sub_ops.append(op("patch", "patch", "patch", f"Patch the status of a {kind}.",
                              sub=camel, query=_PATCH_QUERY, body=meta.PATCH,
                              consumes=PATCH_TYPES,
                              responses=(("200", _name(kind)), ("201", _name(kind)))))
        paths.append(Path(f"{prefix}/{info.plural}/{{name}}/{sub.name}", (*ns_params, "name"),
                          tuple(sub_ops)))
    return paths


def _all_paths() -> list[Path]:
    return [path for info in resources.BY_PLURAL.values() for path in _paths_for(info)]


def _gvk(kind: str) -> dict[str, str]:
    return {"group": resources.GROUP, "version": resources.VERSION, "kind": kind}


def openapi_v3() -> dict[str, Any]:
    """The OpenAPI 3.0 document of ``apis/worker.gpustack.ai/v1``."""
    paths: dict[str, Any] = {}
    for path in _all_paths():
        item: dict[str, Any] = {}
        if path.path_params:
            item["parameters"] = [_v3_parameter(name) for name in path.path_params]
        for operation in path.operations:
            body: dict[str, Any] = {
                "tags": [_TAG],
                "description": operation.description,
                "operationId": operation.operation_id,
                "parameters": [_v3_parameter(name) for name in operation.query],
                "responses": {
                    code: {"description": "OK" if code == "200" else
                           ("Created" if code == "201" else "Accepted"),
                           "content": {"application/json": {"schema": meta.ref(target)}}}
                    for code, target in operation.responses
                } | {"401": {"description": "Unauthorized"}},
                "x-kubernetes-action": operation.action,
                "x-kubernetes-group-version-kind": _gvk(operation.kind),
            }
            if operation.body is not None:
                body["requestBody"] = {
                    "required": operation.method != "delete",
                    "content": {content_type: {"schema": meta.ref(operation.body)}
                                for content_type in operation.consumes},
                }
            item[operation.method] = body
        paths[path.url] = item
    return {
        "openapi": "3.0.0",
        "info": {"title": resources.GROUP, "version": resources.VERSION},
        "paths": paths,
        "components": {
            "schemas": copy.deepcopy(schemas.DEFINITIONS),
            "securitySchemes": {"BearerToken": {
                "type": "apiKey", "in": "header", "name": "authorization",
                "description": "A bearer token: 'Bearer <token>'."}},
        },
        "security": [{"BearerToken": []}],
    }


def _v3_parameter(name: str) -> dict[str, Any]:
    where, kind, description = _PARAMETERS[name]
    parameter: dict[str, Any] = {"name": name, "in": where, "description": description,
                                 "schema": {"type": kind, "uniqueItems": True}}
    if where == "path":
        parameter["required"] = True
    return parameter


def _v2_parameter(name: str) -> dict[str, Any]:
    where, kind, description = _PARAMETERS[name]
    parameter: dict[str, Any] = {"name": name, "in": where, "description": description,
                                 "type": kind, "uniqueItems": True}
    if where == "path":
        parameter["required"] = True
    return parameter


def to_v2_schema(value: Any) -> Any:
    """A v3 schema in Swagger 2.0 form: ``#/definitions/`` references, ``allOf`` wrappers folded
    into a ``$ref`` with its description, and no ``nullable`` (2.0 cannot say it)."""
    if isinstance(value, list):
        return [to_v2_schema(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "allOf" in value and len(value["allOf"]) == 1 and "type" not in value:
        folded: dict[str, Any] = dict(to_v2_schema(value["allOf"][0]))
        if "description" in value:
            folded["description"] = value["description"]
        return folded
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "nullable":
            continue
        if key == "$ref" and isinstance(item, str):
            out[key] = "#/definitions/" + item.removeprefix(meta.REF_PREFIX)
        elif key in ("properties", "definitions"):
            out[key] = {name: to_v2_schema(sub) for name, sub in item.items()}
        else:
            out[key] = to_v2_schema(item)
    return out


def openapi_v2() -> dict[str, Any]:
    """The Swagger 2.0 document; the aggregator keeps only our ``/apis/<group>/<version>`` paths."""
    paths: dict[str, Any] = {}
    for path in _all_paths():
        item: dict[str, Any] = {}
        if path.path_params:
            item["parameters"] = [_v2_parameter(name) for name in path.path_params]
        for operation in path.operations:
            parameters = [_v2_parameter(name) for name in operation.query]
            if operation.body is not None:
                parameters.insert(0, {
                    "name": "body", "in": "body", "required": operation.method != "delete",
                    "schema": {"$ref": "#/definitions/" + operation.body}})
            item[operation.method] = {
                "tags": [_TAG],
                "description": operation.description,
                "operationId": operation.operation_id,
                "consumes": list(operation.consumes),
                "produces": ["application/json"],
                "schemes": ["https"],
                "parameters": parameters,
                "responses": {
                    code: {"description": "OK" if code == "200" else
                           ("Created" if code == "201" else "Accepted"),
                           "schema": {"$ref": "#/definitions/" + target}}
                    for code, target in operation.responses
                } | {"401": {"description": "Unauthorized"}},
                "x-kubernetes-action": operation.action,
                "x-kubernetes-group-version-kind": _gvk(operation.kind),
            }
        paths[path.url] = item
    return {
        "swagger": "2.0",
        "info": {"title": resources.GROUP, "version": resources.VERSION},
        "paths": paths,
        "definitions": {name: to_v2_schema(body) for name, body in schemas.DEFINITIONS.items()},
        "securityDefinitions": {"BearerToken": {
            "type": "apiKey", "in": "header", "name": "authorization",
            "description": "A bearer token: 'Bearer <token>'."}},
        "security": [{"BearerToken": []}],
    }
