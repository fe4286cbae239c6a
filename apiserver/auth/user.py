"""The authenticated identity attached to each request (``request.scope["user"]``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypedDict, TypeVar

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"

# Extra keys bound service-account tokens carry (k8s.io/apiserver authentication/serviceaccount).
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
NODE_NAME = "authentication.kubernetes.io/node-name"
NODE_UID = "authentication.kubernetes.io/node-uid"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"

Extra = Mapping[str, tuple[str, ...]]


class WireIdentity(TypedDict, total=False):
    """The uid, groups and extra of a user as kube's reviews write them (a SubjectAccessReview's
    spec, a SelfSubjectReview's ``userInfo``), each left out when empty (``omitempty``)."""

    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


Wire = TypeVar("Wire", bound=WireIdentity)


@dataclasses.dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Extra = dataclasses.field(default_factory=dict)

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS

    def extra_values(self, key: str) -> tuple[str, ...]:
        return tuple(self.extra.get(key, ()))

    def wire(self, into: Wire) -> Wire:
        """``into`` (a review's object) with everything but the name, as the reviews write it
        (the name's key differs): uid, groups and extra, each left out when empty."""
        if self.uid:
            into["uid"] = self.uid
        if self.groups:
            into["groups"] = list(self.groups)
        if self.extra:
            into["extra"] = {key: list(values) for key, values in self.extra.items()}
        return into

    def with_group(self, group: str) -> UserInfo:
        """The same user with ``group`` appended unless it is already there."""
        if group in self.groups:
            return self
        return dataclasses.replace(self, groups=(*self.groups, group))


ANONYMOUS_USER = UserInfo(name=ANONYMOUS, groups=(UNAUTHENTICATED,))


def service_account(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def split_service_account(username: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of ``system:serviceaccount:<ns>:<name>``, else None."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = username[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}")
