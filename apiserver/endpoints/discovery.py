"""API discovery: ``/apis``, ``/apis/<group>``, ``/apis/<group>/<version>`` and aggregated v2.

Everything is derived from the resource table ``openapi.resources.SERVED`` once, encoded once and
served from bytes. ``/apis`` answers the aggregated discovery types (``apidiscovery.k8s.io`` v2
and v2beta1) when ``Accept`` asks for them, with an ETag, ``304`` on a matching
``If-None-Match`` and ``Vary: Accept``; it answers 406 when ``Accept`` names only aggregated types
this server does not serve (kube-aggregator 1.26-1.28.1 fall back to legacy discovery only on
406), and the legacy ``APIGroupList`` otherwise.

A mode may add groups it serves beside this API (``Group``: standalone mode's review APIs,
``endpoints.selfreviews.GROUPS``); they are listed before ours, as kube lists its built-in groups
before aggregated ones, and get their own ``/apis/<group>`` and ``/apis/<group>/<version>``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apiserver import errors
from apiserver.endpoints import negotiation
from openapi import resources

DISCOVERY_GROUP = "apidiscovery.k8s.io"
AGGREGATED_AS = "APIGroupDiscoveryList"
AGGREGATED_VERSIONS = ("v2", "v2beta1")
LEGACY = "legacy"


@dataclasses.dataclass(frozen=True)
class Resource:
    """A resource of another group, as discovery names it (no subresources, no short names)."""

    plural: str
    singular: str
    kind: str
    verbs: tuple[str, ...]
    namespaced: bool = False


@dataclasses.dataclass(frozen=True)
class Version:
    version: str
    resources: tuple[Resource, ...]


@dataclasses.dataclass(frozen=True)
class Group:
    """A group served beside ``worker.gpustack.ai``; ``versions`` preferred first."""

    name: str
    versions: tuple[Version, ...]


def choose(accept: str) -> str | None:
    """``"v2"``, ``"v2beta1"``, ``"legacy"`` (plain JSON) or None when nothing is acceptable."""
    if not accept.strip():
        return LEGACY
    for media in negotiation.parse_accept(accept):
        if media.quality <= 0:
            continue
        if media.params.get("g") == DISCOVERY_GROUP:
            version = media.params.get("v")
            is_list = media.params.get("as") == AGGREGATED_AS
            if media.type == "application/json" and is_list and version in AGGREGATED_VERSIONS:
                return version
            continue
        if media.params.get("as"):
            continue  # some other typed view (Table, PartialObjectMetadata): not for discovery
        if media.type in ("application/json", "application/*", "*/*"):
            return LEGACY
    return None


def group_list(extra: Sequence[Group] = ()) -> dict[str, Any]:
    version = {"groupVersion": resources.GROUP_VERSION, "version": resources.VERSION}
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [*(_other_group_body(group) for group in extra), _group_body(version)],
    }


def api_group() -> dict[str, Any]:
    version = {"groupVersion": resources.GROUP_VERSION, "version": resources.VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_body(version)}


def _names(info: resources.ResourceInfo) -> dict[str, list[str]]:
    """The short names and categories both discovery documents carry, each left out when
    empty."""
    found = {"shortNames": list(info.short_names), "categories": list(info.categories)}
    return {key: value for key, value in found.items() if value}


def resource_list(served: Sequence[resources.ResourceInfo] = resources.SERVED) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for info in served:
        entry: dict[str, Any] = {
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": list(info.verbs),
            **_names(info),
        }
        entries.append(entry)
        for sub in info.subresources:
            if sub.discovered:
                # a subresource's scope must equal its parent's or the aggregator drops the GV
                entries.append(
                    {
                        "name": f"{info.plural}/{sub.name}",
                        "singularName": "",
                        "namespaced": info.namespaced,
                        "kind": sub.kind,
                        "verbs": list(sub.verbs),
                    }
                )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": resources.GROUP_VERSION,
        "resources": entries,
    }


def other_api_group(group: Group) -> dict[str, Any]:
    return {"kind": "APIGroup", "apiVersion": "v1", **_other_group_body(group)}


def other_resource_list(group: Group, version: Version) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group.name}/{version.version}",
        "resources": [{"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                       "kind": r.kind, "verbs": list(r.verbs)} for r in version.resources],
    }


def _other_aggregated(group: Group) -> dict[str, Any]:
    return {
        "metadata": {"name": group.name},
        "versions": [
            {"version": version.version, "freshness": "Current", "resources": [
                {"resource": r.plural,
                 "responseKind": {"group": group.name, "version": version.version,
                                  "kind": r.kind},
                 "scope": "Namespaced" if r.namespaced else "Cluster",
                 "singularResource": r.singular, "verbs": list(r.verbs)}
                for r in version.resources]}
            for version in group.versions
        ],
    }


def aggregated(version: str,
               served: Sequence[resources.ResourceInfo] = resources.SERVED,
               extra: Sequence[Group] = ()) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for info in served:
        entry: dict[str, Any] = {
            "resource": info.plural,
            "responseKind": _kind(info.kind),
            "scope": "Namespaced" if info.namespaced else "Cluster",
            "singularResource": info.singular,
            "verbs": list(info.verbs),
            **_names(info),
        }
        subresources = [
            {"subresource": sub.name, "responseKind": _kind(sub.kind), "verbs": list(sub.verbs)}
            for sub in info.subresources
            if sub.discovered
        ]
        if subresources:
            entry["subresources"] = subresources
        items.append(entry)
    return {
        "kind": AGGREGATED_AS,
        "apiVersion": f"{DISCOVERY_GROUP}/{version}",
        "metadata": {},
        "items": [
            *(_other_aggregated(group) for group in extra),
            {
                "metadata": {"name": resources.GROUP},
                "versions": [
                    {"version": resources.VERSION, "freshness": "Current", "resources": items}
                ],
            }
        ],
    }


def content_type(version: str) -> str:
    return f"application/json;g={DISCOVERY_GROUP};v={version};as={AGGREGATED_AS}"


def etag(body: bytes) -> str:
    return f'"{hashlib.sha256(body).hexdigest()}"'


def etag_matches(if_none_match: str, tag: str) -> bool:
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        candidate = candidate.removeprefix("W/")
        if candidate in ("*", tag):
            return True
    return False


class Documents:
    """The discovery bodies of ``served`` (the one resource table) and of the ``extra`` groups,
    encoded once."""

    def __init__(self, served: Sequence[resources.ResourceInfo] = resources.SERVED,
                 extra: Sequence[Group] = ()) -> None:
        self.group_list = orjson.dumps(group_list(extra))
        self.api_group = orjson.dumps(api_group())
        self.resource_list = orjson.dumps(resource_list(served))
        self.aggregated = {v: orjson.dumps(aggregated(v, served, extra))
                           for v in AGGREGATED_VERSIONS}
        self.others: dict[str, bytes] = {}
        """Path -> body of the extra groups' ``/apis/<group>`` and ``/apis/<group>/<v>``."""
        for group in extra:
            self.others[f"/apis/{group.name}"] = orjson.dumps(other_api_group(group))
            for each in group.versions:
                self.others[f"/apis/{group.name}/{each.version}"] = orjson.dumps(
                    other_resource_list(group, each))
        self.etags = {v: etag(body) for v, body in self.aggregated.items()}

    async def apis(self, request: Request) -> Response:
        chosen = choose(request.headers.get("accept", ""))
        if chosen is None:
            raise errors.NotAcceptable(
                "only the following media types are accepted: application/json, "
                + ", ".join(content_type(v) for v in AGGREGATED_VERSIONS)
            )
        vary = {"Vary": "Accept"}
        if chosen == LEGACY:
            return _json(self.group_list, headers=vary)
        tag = self.etags[chosen]
        headers = {**vary, "ETag": tag, "Cache-Control": "public"}
        if etag_matches(request.headers.get("if-none-match", ""), tag):
            return Response(status_code=304, headers=headers)
        return Response(self.aggregated[chosen], headers=headers, media_type=content_type(chosen))

    async def group(self, request: Request) -> Response:
        return _json(self.api_group)

    async def version(self, request: Request) -> Response:
        return _json(self.resource_list)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/apis", self.apis, methods=["GET"]),
            Route(f"/apis/{resources.GROUP}", self.group, methods=["GET"]),
            Route(f"/apis/{resources.GROUP_VERSION}", self.version, methods=["GET"]),
            *(Route(path, _serve(body), methods=["GET"]) for path, body in self.others.items()),
        ]


def routes(served: Sequence[resources.ResourceInfo] = resources.SERVED,
           extra: Sequence[Group] = ()) -> list[BaseRoute]:
    return Documents(served, extra).routes()


def _group_body(version: dict[str, str]) -> dict[str, Any]:
    return {"name": resources.GROUP, "versions": [version], "preferredVersion": version}


def _other_group_body(group: Group) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group.name}/{v.version}", "version": v.version}
                for v in group.versions]
    return {"name": group.name, "versions": versions, "preferredVersion": versions[0]}


def _kind(kind: str) -> dict[str, str]:
    return {"group": resources.GROUP, "version": resources.VERSION, "kind": kind}


def _serve(body: bytes) -> Callable[[Request], Awaitable[Response]]:
    async def document(request: Request) -> Response:
        return _json(body)

    return document


def _json(body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(body, headers=headers, media_type="application/json")
