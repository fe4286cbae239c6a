"""What a request asks to do, in the terms an authorizer judges (kube's ``authorizer.Attributes``).

The attributes are the caller plus the request's one parse (``apiserver.request.info``): the
verb, group, version, namespace, resource, subresource and name that the handlers serve are the
ones judged here, read from the same object.
"""

from __future__ import annotations

import dataclasses

from apiserver.auth import user as users
from apiserver.request import info as infos


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Attributes(infos.Target):
    """One request as an authorizer sees it (kube's ``authorizer.Attributes``): its target and
    the user asking."""

    user: users.UserInfo


def of(user: users.UserInfo, request: infos.RequestInfo) -> Attributes:
    """The attributes of ``request`` made by ``user``."""
    if not request.resource_request:
        return Attributes(user=user, verb=request.verb, path=request.path)
    return Attributes(
        user=user, verb=request.verb, path=request.path, resource_request=True,
        api_group=request.api_group, api_version=request.api_version,
        namespace=request.namespace, resource=request.resource,
        subresource=request.subresource, name=request.name,
    )  # fmt: skip


def parse(user: users.UserInfo, method: str, path: str, query: str) -> Attributes:
    """The attributes of ``method path?query`` made by ``user`` (parsing it once)."""
    return of(user, infos.parse(method, path, query))
