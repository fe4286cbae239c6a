"""What a request asks to do, in the terms an authorizer judges: kube's request info.

``parse`` reads the method, path and query once per request, exactly as kube-apiserver's
``RequestInfoFactory`` does (k8s.io/apiserver endpoints/request/requestinfo.go):

- ``/api/<version>/...`` and ``/apis/<group>/<version>/...`` are resource requests; anything else
  (``/apis``, ``/apis/<group>``, ``/apis/<group>/<version>``, ``/openapi/v2``, ``/version``,
  ``/healthz``) is a non-resource request judged by path, with the lower-case method as its verb;
- POST is ``create``, PUT ``update``, PATCH ``patch``, DELETE ``delete`` on a name and
  ``deletecollection`` on a collection, GET and HEAD ``get`` on a name, ``list`` on a collection,
  or ``watch`` when ``watch`` is true (any value but false/0 when it does not parse);
- ``fieldSelector=metadata.name=X`` on a list or watch fills in the name;
- ``namespaces/<ns>/<resource>`` sets the namespace; a third segment after the name is the
  subresource (``status``, ``progress``); a cluster-wide list has an empty namespace.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

from apiserver.auth import user as users

_VERBS = {
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
    "GET": "get",
    "HEAD": "get",
}
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_GROUPLESS = "api"
_PREFIXES = ("api", "apis")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_SPECIAL_VERBS = ("proxy", "watch")


@dataclasses.dataclass(frozen=True, slots=True)
class Attributes:
    """One request as an authorizer sees it (kube's ``authorizer.Attributes``)."""

    user: users.UserInfo
    verb: str
    path: str
    resource_request: bool = False
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def parse(user: users.UserInfo, method: str, path: str, query: str) -> Attributes:
    """The attributes of ``method path?query`` made by ``user``."""
    parts = [p for p in path.strip("/").split("/")] if path.strip("/") else []
    method = method.upper()
    non_resource = Attributes(user=user, verb=method.lower(), path=path)
    if len(parts) < 3 or parts[0] not in _PREFIXES:
        return non_resource  # too short to name a resource, or not under /api or /apis
    if parts[0] == _GROUPLESS:
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return non_resource  # /apis/<group>/<version>: discovery
        group, version, rest = parts[1], parts[2], parts[3:]

    verb = _VERBS.get(method, "")
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return non_resource  # /apis/<group>/<version>/watch alone names nothing
        verb = rest[0]
        rest = rest[1:]  # a legacy /watch/ path; a watch of one name is still a watch
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""

    if not name and verb == "get":
        verb = "watch" if _watch(query) else "list"
    if verb in ("list", "watch") and not name:
        name = _name_from_field_selector(query)
    if verb == "delete" and not name:
        verb = "deletecollection"
    return Attributes(
        user=user, verb=verb, path=path, resource_request=True, api_group=group,
        api_version=version, namespace=namespace, resource=resource, subresource=subresource,
        name=name,
    )  # fmt: skip


def _query_values(query: str, key: str) -> list[str]:
    if key not in query:
        return []
    return [v for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True) if k == key]


def _watch(query: str) -> bool:
    values = _query_values(query, "watch")
    if not values:
        return False
    value = values[0]
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    # kube's fallback when the options do not parse: a watch unless it says false or 0
    return value.lower() not in ("false", "0")


def _name_from_field_selector(query: str) -> str:
    """The name a ``fieldSelector`` pins with ``metadata.name=X`` (or ``==``), else ``""``."""
    values = _query_values(query, "fieldSelector")
    if not values:
        return ""
    for term in _split_terms(values[0]):
        for operator in ("==", "="):
            field, sep, value = term.partition(operator)
            if sep and field.strip() == "metadata.name" and not value.startswith("="):
                value = _unescape(value.strip())
                return value if _valid_path_segment(value) else ""
            if sep:
                break
    return ""


def _split_terms(selector: str) -> list[str]:
    """Split on commas not escaped with a backslash (kube's field selector escaping)."""
    terms: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in selector:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return terms


def _unescape(value: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(ch)
    return "".join(out)


def _valid_path_segment(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "%" not in name
