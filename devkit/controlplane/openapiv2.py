"""``GET /openapi/v2``: kube-apiserver's merged Swagger 2.0 document.

kube-aggregator downloads every APIService backend's ``/openapi/v2`` as ``system:aggregator``
(``Accept: application/json``), keeps the paths under ``/apis/<group>/<version>/`` and the
definitions they reach (kube-openapi's ``FilterSpecByPathsWithoutSideEffects``), and merges them
into kube-apiserver's own document: a path the document already has is kept, a definition equal
to one already there is shared, and one that differs is renamed ``<name>_v2`` (``_v3``...) with
the backend's references rewritten (``MergeSpecsIgnorePathConflict``). A backend that does not
answer is left out. The fixture's own part is the base (info, security) with no paths or
definitions of its own, so the merged document holds exactly what the backends contribute.

JSON is served when ``Accept`` is absent or prefers ``application/json`` (or ``*/*``), with
kube-openapi's quoted upper-case SHA-512 ``ETag`` and 304 on a matching ``If-None-Match``. The
protobuf form (``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``, what kubectl up to
1.28 asks for) is relayed from the backend when exactly one APIService is registered, which then
is the whole merged document but for kube's info; with none or several, or when that backend
does not answer it, the fixture answers 404 as it did before it served ``/openapi/v2`` at all
(encoding protobuf itself would need the code under test).
"""

from __future__ import annotations

import copy
import hashlib
import http.client
from collections.abc import Iterator
from typing import Any

import orjson

from devkit.controlplane import aggregation

PATH = "/openapi/v2"
PROTOBUF_PREFIX = "application/com.github.proto-openapi.spec.v2"
DEFINITION_PREFIX = "#/definitions/"
JSON = "json"
PROTOBUF = "protobuf"
_FAILURES = (OSError, http.client.HTTPException, ValueError, KeyError, TypeError,
             AttributeError)  # fmt: skip


def negotiate(accept: str) -> str | None:
    """``"json"``, ``"protobuf"`` or None (406), as kube-openapi's handler picks the first
    acceptable media range (by quality, the client's order among equals)."""
    ranges: list[tuple[float, str]] = []
    for part in (accept or "*/*").split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        ranges.append((quality, media.lower()))
    for quality, media in sorted(ranges, key=lambda entry: -entry[0]):
        if quality <= 0:
            continue
        if media in ("application/json", "application/*", "*/*"):
            return JSON
        if media.startswith(PROTOBUF_PREFIX):
            return PROTOBUF
    return None


def base(git_version: str) -> dict[str, Any]:
    """kube-apiserver's own part of the document (its info and security, no paths)."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": git_version},
        "paths": {},
        "definitions": {},
        "securityDefinitions": {"BearerToken": {
            "description": "Bearer Token authentication", "type": "apiKey",
            "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    }  # fmt: skip


def merged(plane: Any, services: list[aggregation.APIService]) -> dict[str, Any]:
    """The document kube-apiserver serves: its own part plus every backend's that answers."""
    document = base(plane.git_version)
    for service in sorted(services, key=lambda s: s.group):
        try:
            answer = aggregation.fetch(plane, service, PATH, aggregation.OPENAPI_USER)
            if answer.code != 200:
                continue
            spec = orjson.loads(answer.body)
            filtered = filtered_by_prefix(spec, f"/apis/{service.group}/{service.version}/")
        except _FAILURES:
            continue
        merge_into(document, filtered)
    return document


def relayed_protobuf(plane: Any,
                     services: list[aggregation.APIService]) -> aggregation.Fetched | None:
    """The only backend's protobuf document (body and Content-Type as it answered), None when
    that is not what kube would serve."""
    if len(services) != 1:
        return None
    try:
        answer = aggregation.fetch(plane, services[0], PATH, aggregation.OPENAPI_USER,
                                   accept=f"{PROTOBUF_PREFIX}@v1.0+protobuf")  # fmt: skip
    except _FAILURES:
        return None
    return answer if answer.code == 200 else None


def etag(body: bytes) -> str:
    return '"' + hashlib.sha512(body).hexdigest().upper() + '"'


def filtered_by_prefix(spec: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The paths under ``prefix`` and only the definitions they reach, directly or through
    other definitions."""
    paths = {path: item for path, item in (spec.get("paths") or {}).items()
             if path.startswith(prefix)}  # fmt: skip
    definitions = spec.get("definitions") or {}
    used: set[str] = set()
    pending = list(_references(paths))
    while pending:
        name = pending.pop()
        if name in used or name not in definitions:
            continue
        used.add(name)
        pending.extend(_references(definitions[name]))
    return {**spec, "paths": paths,
            "definitions": {k: v for k, v in definitions.items() if k in used}}  # fmt: skip


def merge_into(document: dict[str, Any], source: dict[str, Any]) -> None:
    """kube-openapi's ``MergeSpecsIgnorePathConflict`` of ``source`` into ``document``."""
    paths = {k: v for k, v in source["paths"].items() if k not in document["paths"]}
    source = filtered_by_prefix({**source, "paths": paths}, "")
    definitions: dict[str, Any] = copy.deepcopy(source["definitions"])
    paths = copy.deepcopy(source["paths"])
    taken = set(document["definitions"])
    renames: dict[str, str] = {}
    for name, schema in definitions.items():
        if name in taken and (name not in document["definitions"]
                              or document["definitions"][name] != schema):
            suffix = 2
            while f"{name}_v{suffix}" in taken or f"{name}_v{suffix}" in definitions:
                suffix += 1
            renames[name] = f"{name}_v{suffix}"
            taken.add(renames[name])
    if renames:
        _rename(paths, renames)
        _rename(definitions, renames)
        definitions = {renames.get(name, name): schema for name, schema in definitions.items()}
    for name, schema in definitions.items():
        document["definitions"].setdefault(name, schema)
    document["paths"].update(paths)


def _references(value: Any) -> Iterator[str]:
    """The definition names ``value``'s ``$ref``s name, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str) and item.startswith(DEFINITION_PREFIX):
                yield item[len(DEFINITION_PREFIX):]
            else:
                yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


def _rename(value: Any, renames: dict[str, str]) -> None:
    """Rewrite, in place, the ``$ref``s that name a renamed definition."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str) and item.startswith(DEFINITION_PREFIX):
                name = item[len(DEFINITION_PREFIX):]
                if name in renames:
                    value[key] = DEFINITION_PREFIX + renames[name]
            else:
                _rename(item, renames)
    elif isinstance(value, list):
        for item in value:
            _rename(item, renames)
