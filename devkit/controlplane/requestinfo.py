"""A request's authorization attributes, derived as apiserver's requestinfo.go derives them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from urllib import parse

from devkit.controlplane.identity import UserInfo
from devkit.controlplane.rbac import Attributes

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclasses.dataclass(frozen=True)
class RequestInfo:
    path: str
    verb: str
    resource_request: bool
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    # Path segments after the subresource (``nodes/n/proxy/configz`` -> ("configz",)).
    rest: tuple[str, ...] = ()

    def attributes(self, user: UserInfo) -> Attributes:
        return Attributes(
            user=user,
            verb=self.verb,
            resource_request=self.resource_request,
            namespace=self.namespace,
            group=self.group,
            version=self.version,
            resource=self.resource,
            subresource=self.subresource,
            name=self.name,
            path=self.path,
        )


def query_values(query: str) -> dict[str, str]:
    """Each parameter's first value, as Go's ``url.Values.Get`` (and so kube-apiserver) reads a
    repeated one."""
    found: dict[str, str] = {}
    for key, value in parse.parse_qsl(query, keep_blank_values=True):
        found.setdefault(key, value)
    return found


def parse_request(method: str, raw_path: str, query: Mapping[str, str]) -> RequestInfo:
    path = parse.urlsplit(raw_path).path
    segments = [parse.unquote(s) for s in path.strip("/").split("/") if s]
    non_resource = RequestInfo(path=path, verb=method.lower(), resource_request=False)
    if not segments:
        return non_resource
    if segments[0] == "api" and len(segments) >= 3:
        group, version, rest = "", segments[1], segments[2:]
    elif segments[0] == "apis" and len(segments) >= 4:
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return non_resource
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]
        if len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    watch = query.get("watch", "").lower() not in ("", "false", "0")
    if method in _VERBS:
        verb = _VERBS[method]
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    elif method in ("GET", "HEAD"):
        verb = ("watch" if watch else "get") if name else ("watch" if watch else "list")
    else:
        verb = method.lower()
    if verb in ("list", "watch") and not name:
        for requirement in query.get("fieldSelector", "").split(","):
            key, _, value = requirement.partition("=")
            if key.strip() == "metadata.name" and value and not value.startswith("="):
                name = value.strip()
    return RequestInfo(
        path=path,
        verb=verb,
        resource_request=True,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        name=name,
        subresource=subresource,
        rest=tuple(rest[3:]),
    )
