"""Discovery documents for the served kinds and the review endpoints, so kubectl can map names to
paths: the legacy ones (``/api``, ``/apis``, per group-version resource lists) and aggregated
discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList`` on ``/api`` and ``/apis``).

The aggregated items of the fixture's own groups are its legacy lists converted as apiserver's
``ConvertGroupVersionIntoToDiscovery`` converts them (a subresource folded into its parent,
``responseKind`` with the group and version the legacy entry names, empty for built-ins); the
registered APIServices' items are what their backends answer (``aggregation.discovery_items``),
listed after the fixture's own as their lower group priority puts them. The fixture speaks no
protobuf and no ``v2beta1``: such media ranges are passed over in ``Accept``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from devkit.controlplane.resources import ALL, Kind

_REVIEWS = {
    "authentication.k8s.io": (("tokenreviews", "TokenReview"),
                              ("selfsubjectreviews", "SelfSubjectReview")),
    "authorization.k8s.io": (("subjectaccessreviews", "SubjectAccessReview"),
                             ("selfsubjectaccessreviews", "SelfSubjectAccessReview")),
}  # fmt: skip


DISCOVERY_GROUP = "apidiscovery.k8s.io"
AGGREGATED_KIND = "APIGroupDiscoveryList"
AGGREGATED_TYPE = f"application/json;g={DISCOVERY_GROUP};v=v2;as={AGGREGATED_KIND}"


def wants_aggregated(accept: str) -> bool:
    """True when the most preferred media range kube can serve is the v2 list; False for plain
    JSON (legacy discovery), a missing ``Accept`` or nothing acceptable."""
    ranges: list[tuple[float, str, dict[str, str]]] = []
    for part in accept.split(","):
        media, *raw = (piece.strip() for piece in part.split(";"))
        params = {key.strip().lower(): value.strip()
                  for key, _, value in (item.partition("=") for item in raw)}  # fmt: skip
        try:
            quality = float(params.pop("q", "1"))
        except ValueError:
            quality = 0.0
        ranges.append((quality, media.lower(), params))
    # goautoneg orders by quality, a stable sort keeping the client's order among equals
    for quality, media, params in sorted(ranges, key=lambda entry: -entry[0]):
        if quality <= 0:
            continue
        if params.get("g") == DISCOVERY_GROUP:
            if (media == "application/json" and params.get("v") == "v2"
                    and params.get("as") == AGGREGATED_KIND):
                return True
            continue
        if not params.get("as") and media in ("application/json", "application/*", "*/*"):
            return False
    return False


def converted(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A legacy ``APIResourceList``'s resources in the v2 shape (apiserver's
    ``ConvertGroupVersionIntoToDiscovery``; a subresource whose parent is missing is dropped)."""
    resources: list[dict[str, Any]] = []
    parents: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if "/" in entry["name"]:
            continue
        resource: dict[str, Any] = {
            "resource": entry["name"],
            "responseKind": _response_kind(entry),
            "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
            "singularResource": entry.get("singularName", ""),
            "verbs": list(entry.get("verbs") or []),
        }
        for legacy, key in (("shortNames", "shortNames"), ("categories", "categories")):
            if entry.get(legacy):
                resource[key] = list(entry[legacy])
        resources.append(resource)
        parents[entry["name"]] = resource
    for entry in entries:
        parent, _, sub = entry["name"].partition("/")
        if not sub or parent not in parents:
            continue
        parents[parent].setdefault("subresources", []).append({
            "subresource": sub,
            "responseKind": _response_kind(entry),
            "verbs": list(entry.get("verbs") or []),
        })  # fmt: skip
    return resources


def _response_kind(entry: dict[str, Any]) -> dict[str, str]:
    return {"group": str(entry.get("group", "")), "version": str(entry.get("version", "")),
            "kind": str(entry.get("kind", ""))}  # fmt: skip


def aggregated(path: str, backends: Sequence[dict[str, Any]] = ()) -> dict[str, Any] | None:
    """The ``APIGroupDiscoveryList`` for ``/api`` (the core group, an item without a name) or
    ``/apis`` (the fixture's groups by name, then ``backends``' items); None elsewhere."""
    parts = [p for p in path.split("/") if p]
    items: list[dict[str, Any]] = []
    if parts == ["api"]:
        items.append(_item("", "v1"))
    elif parts == ["apis"]:
        items.extend(_item(name, version) for name, version in sorted(_groups().items()))
        items.extend(backends)
    else:
        return None
    return {"kind": AGGREGATED_KIND, "apiVersion": f"{DISCOVERY_GROUP}/v2", "metadata": {},
            "items": items}  # fmt: skip


def etag(document: dict[str, Any]) -> str:
    """kube's aggregated-discovery ETag: the quoted upper-case hex SHA-512 of the JSON."""
    return '"' + hashlib.sha512(orjson.dumps(document)).hexdigest().upper() + '"'


def _item(group: str, version: str) -> dict[str, Any]:
    listed = _resource_list(group, version)
    resources = converted(listed["resources"]) if listed is not None else []
    return {
        "metadata": {"name": group} if group else {},
        "versions": [{"version": version, "resources": resources, "freshness": "Current"}],
    }


def _groups() -> dict[str, str]:
    versions = {k.group: k.version for k in ALL if k.group}
    versions.update({group: "v1" for group in _REVIEWS})
    return versions


def _resource(kind: Kind) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    entries = [entry]
    if kind.has_status:
        entries.append({
            "name": f"{kind.plural}/status", "singularName": "", "namespaced": kind.namespaced,
            "kind": kind.kind, "verbs": ["get", "patch", "update"],
        })  # fmt: skip
    return entries


def _resource_list(group: str, version: str) -> dict[str, Any] | None:
    resources: list[dict[str, Any]] = []
    for kind in ALL:
        if kind.group == group and kind.version == version:
            resources.extend(_resource(kind))
    for plural, kind_name in _REVIEWS.get(group, ()) if version == "v1" else ():
        resources.append({"name": plural, "singularName": kind_name.lower(),
                          "namespaced": False, "kind": kind_name, "verbs": ["create"]})  # fmt: skip
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _group(name: str, version: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{name}/{version}", "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


def document(path: str, address: str,
             aggregated: dict[str, str] | None = None) -> dict[str, Any] | None:
    """``aggregated``: group -> version of the registered APIServices, listed in ``/apis``
    (their own documents come from their backends)."""
    parts = [p for p in path.split("/") if p]
    groups = _groups()
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }
    if parts == ["api", "v1"]:
        return _resource_list("", "v1")
    if parts == ["apis"]:
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group(name, version)
                       for name, version in sorted({**groups, **(aggregated or {})}.items())],
        }
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], groups[parts[1]])}
    if len(parts) == 3 and parts[0] == "apis":
        return _resource_list(parts[1], parts[2])
    return None
