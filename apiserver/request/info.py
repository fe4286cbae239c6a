"""What a request asks to do, parsed once per request: kube's ``RequestInfo`` and its options.

``parse`` reads the method, path and query exactly as kube-apiserver's ``RequestInfoFactory``
does (k8s.io/apiserver endpoints/request/requestinfo.go), and builds the typed options the verb
uses from the same ``Query``:

- ``/api/<version>/...`` and ``/apis/<group>/<version>/...`` are resource requests; anything else
  (``/apis``, ``/apis/<group>``, ``/apis/<group>/<version>``, ``/openapi/v2``, ``/version``,
  ``/healthz``) is a non-resource request judged by path, with the lower-case method as its verb;
- POST is ``create``, PUT ``update``, PATCH ``patch``, DELETE ``delete`` on a name and
  ``deletecollection`` on a collection, GET and HEAD ``get`` on a name, ``list`` on a collection,
  or ``watch`` when ``watch`` is true (kube's fallback when it is not a boolean: a watch unless it
  says false or 0; the request is then refused with a 400 after authorization);
- a ``fieldSelector`` requiring ``metadata.name=X`` on a list or watch names ``X`` (the same
  parser the list uses, so the name authorized is the name served);
- ``namespaces/<ns>/<resource>`` sets the namespace; a third segment after the name is the
  subresource (``status``, ``progress``); a cluster-wide list has an empty namespace.

A request that cannot be served as parsed carries its ``problem``: a repeated single-valued
parameter, a malformed option, a resource path with an empty, ``.`` or ``..`` segment. The
authorization filter judges the request first (as kube does: a caller who may not ask gets the
403) and then refuses it with that problem; ``served`` raises it for any other reader, so no
layer can act on a request whose parts could be read two ways.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from apiserver import errors
from apiserver.registry import options as registry_options
from apiserver.registry import selectors
from apiserver.request import query as queries
from openapi import fields

SCOPE_KEY = "model-manager.request"
"""Where ``of`` keeps a request's ``RequestInfo`` in the ASGI scope."""

VERBS = {
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
    "GET": "get",
    "HEAD": "get",
}
"""kube's HTTP method to verb map (the one copy; list, watch and deletecollection follow)."""
WRITE_KINDS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}
_GROUPLESS = "api"
_PREFIXES = ("api", "apis")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_SPECIAL_VERBS = ("proxy", "watch")


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """What a request names, as kube's ``RequestInfo`` and ``authorizer.Attributes`` share it:
    a resource (group, version, namespace, resource, subresource, name) or a path."""

    verb: str
    path: str
    resource_request: bool = False
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RequestInfo(Target):
    """One request as every layer sees it. Options not used by the verb are None."""

    method: str
    query: queries.Query
    list_options: registry_options.ListOptions | None = None
    watch_options: registry_options.WatchOptions | None = None
    write_options: queries.WriteOptions | None = None
    delete_query: queries.DeleteQuery | None = None
    include_object: str = "Metadata"
    resource_version: str = ""
    """``resourceVersion`` of a get (a list's and a watch's are in their options)."""
    problem: errors.StatusError | None = None

    def served(self) -> RequestInfo:
        """This request, when it can be served as parsed; raises its problem otherwise."""
        if self.problem is not None:
            raise self.problem
        return self


def parse(method: str, path: str, query_string: str = "") -> RequestInfo:
    """The request ``method path?query_string`` (``path`` percent-decoded, as ASGI gives it)."""
    query = queries.parse(query_string)
    method = method.upper()
    found = _target(method, path, query)
    if query.problem is not None:
        return dataclasses.replace(found, problem=query.problem)
    if found.problem is not None:
        return found
    try:
        return _with_options(found)
    except errors.StatusError as problem:
        return dataclasses.replace(found, problem=problem)


PARSED_KEPT = 1024
"""How many request lines ``of`` keeps parsed (clients repeat the same few GETs, LISTs and
watches; a client sending endless distinct paths only evicts)."""
_parsed: dict[tuple[str, str, bytes], RequestInfo] = {}


def of(scope: dict[str, Any] | Any) -> RequestInfo:
    """The request's ``RequestInfo``, parsed at the first call and kept in the scope.

    ``parse`` is a pure function of the method, path and query and its answer is immutable
    (frozen all the way down), so the answers for the last ``PARSED_KEPT`` request lines are
    shared between requests; an answer carrying a problem (an exception, raised per request) is
    never shared."""
    found = scope.get(SCOPE_KEY)
    if isinstance(found, RequestInfo):
        return found
    key = (scope.get("method", "GET"), scope.get("path", "/"), scope.get("query_string", b""))
    parsed = _parsed.get(key)
    if parsed is None:
        parsed = parse(key[0], key[1], key[2].decode("latin-1"))
        if parsed.problem is None:
            if len(_parsed) >= PARSED_KEPT:
                del _parsed[next(iter(_parsed))]
            _parsed[key] = parsed
    scope[SCOPE_KEY] = parsed
    return parsed


def served(scope: dict[str, Any] | Any) -> RequestInfo:
    """``of(scope)``, raising the request's problem when it has one."""
    return of(scope).served()


def _target(method: str, path: str, query: queries.Query) -> RequestInfo:
    stripped = path.strip("/")
    parts = stripped.split("/") if stripped else []
    non_resource = RequestInfo(method=method, path=path, verb=method.lower(), query=query)
    if len(parts) < 3 or parts[0] not in _PREFIXES:
        return non_resource  # too short to name a resource, or not under /api or /apis
    if parts[0] == _GROUPLESS:
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return non_resource  # /apis/<group>/<version>: discovery
        group, version, rest = parts[1], parts[2], parts[3:]
    problem = _segment_problem(parts)

    verb = VERBS.get(method, method.lower())
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
    return RequestInfo(
        method=method, path=path, verb=verb, query=query, resource_request=True,
        api_group=group, api_version=version, namespace=namespace, resource=resource,
        subresource=subresource, name=name, problem=problem,
    )  # fmt: skip


def _segment_problem(parts: list[str]) -> errors.StatusError | None:
    """A resource path names each part once: no empty (``//``), ``.`` or ``..`` segment (kube
    refuses such names; here they would let the router and the authorizer split differently)."""
    for part in parts:
        if part in ("", ".", ".."):
            return errors.BadRequest(
                f"invalid request path: the segment {fields.render(part)} is not allowed in a"
                " resource path")
    return None


def _watch(query: queries.Query) -> bool:
    """The verb's reading of ``watch``: Go's booleans, else kube's fallback (any value but
    false/0, ignoring case, asks for a watch; the options' own parse then refuses it)."""
    if not query.has("watch"):
        return False
    value = query.get("watch")
    if value in queries.TRUE:
        return True
    if value in queries.FALSE:
        return False
    return value.lower() not in ("false", "0")


def _name_from_field_selector(query: queries.Query) -> str:
    """The name a ``fieldSelector`` pins with ``metadata.name=X`` (or ``==``), else ``""``; a
    selector that does not parse pins nothing (the list refuses it)."""
    if not query.get("fieldSelector").strip():
        return ""
    try:
        selector = selectors.parse_fields(query.get("fieldSelector"))
    except errors.StatusError:
        return ""
    for field, op, value in selector.requirements:
        if field == "metadata.name" and op == "=":
            return value if _valid_path_segment(value) else ""
    return ""


def _valid_path_segment(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "%" not in name


def _with_options(found: RequestInfo) -> RequestInfo:
    """``found`` with the typed options its verb reads, each built from its one ``Query``."""
    query = found.query
    if not found.resource_request:
        return found
    include = queries.include_object(query)
    verb = found.verb
    if verb == "list":
        return dataclasses.replace(found, list_options=queries.list_options(query),
                                   include_object=include)
    if verb == "watch":
        return dataclasses.replace(found, watch_options=queries.watch_options(query),
                                   include_object=include)
    if verb in WRITE_KINDS:
        return dataclasses.replace(
            found, write_options=queries.write_options(query, WRITE_KINDS[verb]),
            include_object=include)
    if verb in ("delete", "deletecollection"):
        return dataclasses.replace(found, delete_query=queries.delete_query(query),
                                   include_object=include)
    return dataclasses.replace(found, include_object=include,
                               resource_version=query.get("resourceVersion"))
