"""Legacy discovery documents (``/api``, ``/apis``, per group-version resource lists) for the
served kinds and the review endpoints, so kubectl can map names to paths."""

from __future__ import annotations

from typing import Any

from tests.support.controlplane.resources import ALL, Kind

_REVIEWS = {
    "authentication.k8s.io": (("tokenreviews", "TokenReview"),
                              ("selfsubjectreviews", "SelfSubjectReview")),
    "authorization.k8s.io": (("subjectaccessreviews", "SubjectAccessReview"),
                             ("selfsubjectaccessreviews", "SelfSubjectAccessReview")),
}  # fmt: skip


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
