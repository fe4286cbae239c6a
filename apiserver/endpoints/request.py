"""Reading a request's body: DeleteOptions, the bounded body, unknown fields and warnings.

The query options come parsed with the request (``apiserver.request``); this module reads what
only a handler can: the body, merged with those options where kube merges them.
"""

from __future__ import annotations

from typing import Any

from starlette import requests

from apiserver import errors
from apiserver.endpoints import body as bodies
from apiserver.flags import config
from apiserver.registry import options
from apiserver.request import query as request_query
from openapi import fields, meta, pruning, validation

_DELETE_API_VERSIONS = ("", "v1", "meta.k8s.io/v1")
MAX_WARNINGS = 64
"""Warning headers one response carries at most (the rest are counted in the last one)."""
WARNING_RUNES = 4 * 1024
"""Past this many characters of warnings, each further warning is cut to ``WARNING_ITEM``."""
WARNING_ITEM = 256
MAX_LISTED = 100
"""Unknown or duplicate fields a Strict refusal names; the rest are counted."""


WriteOptions = request_query.WriteOptions


_DELETE_SCHEMA = meta.ref(meta.DELETE_OPTIONS)


async def delete_options(query: request_query.DeleteQuery, body: bytes,
                         limits: bodies.Limits = bodies.DEFAULT) -> options.DeleteOptions:
    """DeleteOptions from the query's part, then from the body (``v1`` or ``meta.k8s.io/v1``),
    whose fields are checked against the DeleteOptions schema first (422 naming the field)."""
    dry_run: list[str] = list(query.dry_run)
    policy = query.propagation_policy
    orphan = query.orphan_dependents
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
        orphan_dependents=orphan, dry_run=request_query.dry_run(dry_run, "DeleteOptions"),
    )


async def read_body(request: requests.Request, limit: int = config.MAX_BODY_BYTES) -> bytes:
    """The request body, refusing (413) anything over ``limit`` before reading it all."""
    declared = request.headers.get("content-length")
    if declared and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise bodies.body_too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise bodies.body_too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


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
