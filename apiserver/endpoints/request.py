"""Reading a request: query options, write options, DeleteOptions and the bounded body.

Every query value is checked before use (integers within int64, booleans as kube spells them) and
refused with a 400 naming the parameter; no message echoes more than a cut of the value.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from starlette import datastructures, requests

from apiserver import config, errors
from apiserver.endpoints import body as bodies
from apiserver.registry import options, selectors
from openapi import fields, meta, pruning, validation

FIELD_VALIDATION = ("Ignore", "Strict", "Warn")
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_DELETE_API_VERSIONS = ("", "v1", "meta.k8s.io/v1")
_INT64 = re.compile(r"-?[0-9]{1,19}")
MAX_WARNINGS = 64
"""Warning headers one response carries at most (the rest are counted in the last one)."""
WARNING_RUNES = 4 * 1024
"""Past this many characters of warnings, each further warning is cut to ``WARNING_ITEM``."""
WARNING_ITEM = 256
MAX_LISTED = 100
"""Unknown or duplicate fields a Strict refusal names; the rest are counted."""


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
    raise errors.BadRequest(
        f'invalid value for "{name}": {fields.render(value)} is not a boolean')


def _int(params: datastructures.QueryParams, name: str) -> int | None:
    """An integer query parameter; 400 unless it is a 64-bit integer (as kube parses them)."""
    if name not in params or params[name] == "":
        return None
    value = params[name]
    if not _INT64.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
        raise errors.BadRequest(
            f'invalid value for "{name}": {fields.render(value)} is not a 64-bit integer')
    return int(value)


def is_watch(params: datastructures.QueryParams) -> bool:
    return bool(parse_bool(params, "watch"))


def list_options(params: datastructures.QueryParams) -> options.ListOptions:
    _int(params, "timeoutSeconds")  # a list answers at once, but a malformed one is refused
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
    _int(params, "limit")  # a watch ignores it, but a malformed one is refused as for a list
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
    mode = params.get("fieldValidation", "") or "Warn"
    if mode not in FIELD_VALIDATION:
        raise options.invalid(kind, [fields.not_supported("fieldValidation", mode,
                                                          FIELD_VALIDATION)])
    return WriteOptions(dry_run=dry_run, field_validation=mode)


_DELETE_SCHEMA = meta.ref(meta.DELETE_OPTIONS)


async def delete_options(params: datastructures.QueryParams, body: bytes,
                         limits: bodies.Limits = bodies.DEFAULT) -> options.DeleteOptions:
    """DeleteOptions from the query, then from the body (``v1`` or ``meta.k8s.io/v1``), whose
    fields are checked against the DeleteOptions schema first (422 naming the field)."""
    dry_run = params.getlist("dryRun")
    policy = params.get("propagationPolicy", "")
    orphan = parse_bool(params, "orphanDependents")
    _int(params, "gracePeriodSeconds")  # checked; no resource here deletes gracefully
    uid = resource_version = ""
    if body.strip():
        document = (await bodies.decode(body, "application/json", limits)).document
        problems = validation.check(_DELETE_SCHEMA, document, "", unique=False)
        if problems:
            raise options.invalid("DeleteOptions", problems)
        api_version = document.get("apiVersion") or ""
        if api_version not in _DELETE_API_VERSIONS:
            raise errors.BadRequest("DeleteOptions must have apiVersion v1 or meta.k8s.io/v1, not"
                                    f" {fields.render(api_version)}")
        if document.get("kind") not in (None, "", "DeleteOptions"):
            raise errors.BadRequest(
                f"expected DeleteOptions, got {fields.render(document.get('kind'))}")
        preconditions = document.get("preconditions") or {}
        uid = preconditions.get("uid") or ""
        resource_version = preconditions.get("resourceVersion") or ""
        policy = document.get("propagationPolicy") or policy
        if document.get("orphanDependents") is not None:
            orphan = document["orphanDependents"]
        if document.get("dryRun"):
            dry_run = list(document["dryRun"])
    return options.DeleteOptions(
        uid=uid, resource_version=resource_version, propagation_policy=policy,
        orphan_dependents=orphan, dry_run=_dry_run(dry_run, "DeleteOptions"),
    )


async def read_body(request: requests.Request, limit: int = config.MAX_BODY_BYTES) -> bytes:
    """The request body, refusing (413) anything over ``limit`` before reading it all."""
    declared = request.headers.get("content-length")
    if declared and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> errors.RequestEntityTooLarge:
    return errors.RequestEntityTooLarge(f"Request entity too large: limit is {limit}")


def unknown_fields(kind: str, obj: dict[str, Any], mode: str,
                   duplicates: list[str] | None = None) -> list[str]:
    """Apply fieldValidation: Strict raises 400, Warn returns warnings, Ignore returns none.

    ``duplicates`` are fields the body repeated (see ``body.duplicate_fields``). The object is
    pruned in every mode, in the same walk that finds the unknown fields, so unknown fields are
    never stored and the registry need not prune it again (``from_body``).
    """
    if mode == "Ignore":
        pruning.prune(kind, obj)
        return []
    problems = [f'duplicate field "{fields.cut_path(path)}"' for path in duplicates or []]
    problems.extend(f'unknown field "{fields.cut_path(path)}"'
                    for path in pruning.prune_unknown(kind, obj))
    if problems and mode == "Strict":
        listed = problems[:MAX_LISTED]
        if len(problems) > MAX_LISTED:
            listed.append(f"and {len(problems) - MAX_LISTED} more")
        raise errors.BadRequest("strict decoding error: " + ", ".join(listed))
    return problems


def bounded_warnings(messages: list[str]) -> list[str]:
    """Warnings as kube-apiserver bounds them: whole while the total stays under
    ``WARNING_RUNES``, each cut to ``WARNING_ITEM`` after that, and at most ``MAX_WARNINGS``."""
    kept: list[str] = []
    total = 0
    for message in messages[:MAX_WARNINGS - 1] if len(messages) > MAX_WARNINGS else messages:
        if total + len(message) > WARNING_RUNES:
            message = message[:WARNING_ITEM]
        total += len(message)
        kept.append(message)
    if len(messages) > MAX_WARNINGS:
        kept.append(f"and {len(messages) - len(kept)} more warnings, not listed")
    return kept
