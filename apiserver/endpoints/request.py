"""Reading a request: query options, write options, DeleteOptions and the JSON (or YAML) body."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import yaml
from starlette import datastructures, requests

from apiserver import errors
from apiserver.registry import options, selectors
from openapi import fields, pruning

MAX_BODY = 3 * 1024 * 1024
FIELD_VALIDATION = ("Ignore", "Strict", "Warn")
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_DELETE_API_VERSIONS = ("", "v1", "meta.k8s.io/v1")


@dataclasses.dataclass(frozen=True, slots=True)
class WriteOptions:
    dry_run: bool = False
    field_validation: str = "Warn"


def parse_bool(params: datastructures.QueryParams, name: str) -> bool | None:
    if name not in params:
        return None
    value = params[name]
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.BadRequest(f'invalid value for "{name}": "{value}" is not a boolean')


def _int(params: datastructures.QueryParams, name: str) -> int | None:
    if name not in params or params[name] == "":
        return None
    try:
        return int(params[name])
    except ValueError:
        raise errors.BadRequest(
            f'invalid value for "{name}": "{params[name]}" is not an integer') from None


def is_watch(params: datastructures.QueryParams) -> bool:
    return bool(parse_bool(params, "watch"))


def list_options(params: datastructures.QueryParams) -> options.ListOptions:
    return options.ListOptions(
        label_selector=selectors.parse_labels(params.get("labelSelector", "")),
        field_selector=selectors.parse_fields(params.get("fieldSelector", "")),
        limit=_int(params, "limit") or 0,
        continue_token=params.get("continue", ""),
        resource_version=params.get("resourceVersion", ""),
        resource_version_match=params.get("resourceVersionMatch", ""),
        send_initial_events=parse_bool(params, "sendInitialEvents"),
    )


def watch_options(params: datastructures.QueryParams) -> options.WatchOptions:
    timeout = _int(params, "timeoutSeconds")
    return options.WatchOptions(
        label_selector=selectors.parse_labels(params.get("labelSelector", "")),
        field_selector=selectors.parse_fields(params.get("fieldSelector", "")),
        resource_version=params.get("resourceVersion", ""),
        resource_version_match=params.get("resourceVersionMatch", ""),
        send_initial_events=parse_bool(params, "sendInitialEvents"),
        allow_bookmarks=bool(parse_bool(params, "allowWatchBookmarks")),
        timeout_seconds=float(timeout) if timeout is not None and timeout > 0 else None,
    )


def _dry_run(values: list[str], kind: str) -> bool:
    bad = [value for value in values if value != "All"]
    if bad:
        raise options.invalid(kind, [fields.not_supported("dryRun", bad[0], ("All",))])
    return bool(values)


def write_options(params: datastructures.QueryParams, kind: str) -> WriteOptions:
    """``kind`` names the options in messages: CreateOptions, UpdateOptions or PatchOptions."""
    dry_run = _dry_run(params.getlist("dryRun"), kind)
    validation = params.get("fieldValidation", "") or "Warn"
    if validation not in FIELD_VALIDATION:
        raise options.invalid(kind, [fields.not_supported("fieldValidation", validation,
                                                          FIELD_VALIDATION)])
    return WriteOptions(dry_run=dry_run, field_validation=validation)


def delete_options(params: datastructures.QueryParams, body: bytes) -> options.DeleteOptions:
    """DeleteOptions from the query, then from the body (``v1`` or ``meta.k8s.io/v1``)."""
    dry_run = params.getlist("dryRun")
    policy = params.get("propagationPolicy", "")
    orphan = parse_bool(params, "orphanDependents")
    uid = resource_version = ""
    if body.strip():
        document = decode(body, "application/json")
        api_version = document.get("apiVersion") or ""
        if api_version not in _DELETE_API_VERSIONS:
            raise errors.BadRequest(
                f"DeleteOptions must have apiVersion v1 or meta.k8s.io/v1, not {api_version!r}")
        if document.get("kind") not in (None, "", "DeleteOptions"):
            raise errors.BadRequest(f"expected DeleteOptions, got {document.get('kind')!r}")
        preconditions = document.get("preconditions") or {}
        if not isinstance(preconditions, dict):
            raise errors.BadRequest("DeleteOptions.preconditions must be an object")
        uid = preconditions.get("uid") or ""
        resource_version = preconditions.get("resourceVersion") or ""
        policy = document.get("propagationPolicy") or policy
        if document.get("orphanDependents") is not None:
            orphan = bool(document["orphanDependents"])
        if document.get("dryRun"):
            dry_run = list(document["dryRun"])
    return options.DeleteOptions(
        uid=uid, resource_version=resource_version, propagation_policy=policy,
        orphan_dependents=orphan, dry_run=_dry_run(dry_run, "DeleteOptions"),
    )


async def read_body(request: requests.Request) -> bytes:
    """The request body, refusing (413) anything over 3 MiB before reading it all."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large() -> errors.RequestEntityTooLarge:
    return errors.RequestEntityTooLarge(f"Request entity too large: limit is {MAX_BODY}")


def media_type(content_type: str) -> str:
    """The bare media type (parameters such as ``;charset=utf-8`` stripped)."""
    return content_type.split(";", 1)[0].strip().lower()


def decode(body: bytes, content_type: str) -> dict[str, Any]:
    """A JSON (or YAML) object; 415 for other media types, 400 for a malformed body."""
    kind = media_type(content_type) or "application/json"
    try:
        if kind in ("application/json", "*/*"):
            document = orjson.loads(body)
        elif kind in ("application/yaml", "application/x-yaml", "text/yaml"):
            document = yaml.safe_load(body)
        else:
            raise errors.UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types"
                f" include: application/json, application/yaml (got {kind})")
    except (orjson.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise errors.BadRequest(f"the request body is not valid: {exc}") from exc
    if not isinstance(document, dict):
        raise errors.BadRequest("the request body must be a JSON object")
    return document


def duplicate_fields(body: bytes) -> list[str]:
    """Dotted paths of keys a JSON body repeats (the last value wins when decoding)."""
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, item in value.pairs:
                here = f"{path}.{key}" if path else key
                if key in seen and here not in found:
                    found.append(here)
                seen.add(key)
                walk(item, here)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    try:
        walk(json.loads(body, object_pairs_hook=_Pairs), "")
    except ValueError:
        return []
    return found


class _Pairs:
    """A JSON object kept as its key/value pairs, duplicates included."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


def unknown_fields(kind: str, obj: dict[str, Any], mode: str,
                   duplicates: list[str] | None = None) -> list[str]:
    """Apply fieldValidation: Strict raises 400, Warn returns warnings, Ignore returns none.

    ``duplicates`` are fields the body repeated (see ``duplicate_fields``). The object is
    pruned in every mode, in the same walk that finds the unknown fields, so unknown fields are
    never stored and the registry need not prune it again (``from_body``).
    """
    if mode == "Ignore":
        pruning.prune(kind, obj)
        return []
    problems = [f'duplicate field "{path}"' for path in duplicates or []]
    problems.extend(f'unknown field "{path}"' for path in pruning.prune_unknown(kind, obj))
    if problems and mode == "Strict":
        raise errors.BadRequest("strict decoding error: " + ", ".join(problems))
    return problems
