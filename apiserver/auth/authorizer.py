"""May they: the ``Authorizer`` seam, kube's delegated order, and the 403 kube-apiserver writes.

Order (k8s.io/apiserver server/options/authorization.go): members of ``system:masters`` are
always allowed; non-resource requests to the always-allowed paths (``/healthz``, ``/readyz``,
``/livez`` by default; ``/openapi`` is not among them) are allowed; everything else goes to the
inner authorizer (SubjectAccessReview in a cluster, the local policy in standalone mode).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Protocol

from apiserver import errors
from apiserver.auth import attributes as attrs
from apiserver.auth import user as users

DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEFAULT_ALWAYS_ALLOW_GROUPS = (users.MASTERS,)
_MAX_MESSAGE_VALUE = 256


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    reason: str = ""
    error: str = ""
    """Set when the decision could not be made (an outage); the request then fails closed."""

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


ALLOW = Verdict(Decision.ALLOW)
NO_OPINION = Verdict(Decision.NO_OPINION)


class Authorizer(Protocol):
    async def authorize(self, attributes: attrs.Attributes) -> Verdict: ...


class PathMatcher:
    """kube's path list: exact paths, or prefixes when an entry ends in ``*``."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.exact = frozenset(p.strip("/") for p in paths if p and not p.endswith("*"))
        self.prefixes = tuple(p.strip("/").rstrip("*") for p in paths if p.endswith("*"))

    def __call__(self, path: str) -> bool:
        trimmed = path.strip("/") if path != "/" else ""
        if trimmed in self.exact:
            return True
        return any(trimmed.startswith(prefix) for prefix in self.prefixes)


class Delegating:
    def __init__(self, inner: Authorizer, *,
                 always_allow_paths: Sequence[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
                 always_allow_groups: Sequence[str] = DEFAULT_ALWAYS_ALLOW_GROUPS) -> None:
        self.inner = inner
        self.paths = PathMatcher(always_allow_paths)
        self.groups = frozenset(always_allow_groups)

    async def authorize(self, attributes: attrs.Attributes) -> Verdict:
        if not self.groups.isdisjoint(attributes.user.groups):
            return ALLOW
        if not attributes.resource_request and self.paths(attributes.path):
            return ALLOW
        return await self.inner.authorize(attributes)


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_VALUE else text[:_MAX_MESSAGE_VALUE] + "..."


def _sanitize(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden_message(attributes: attrs.Attributes) -> str:
    """kube's ``forbiddenMessage``: who, which verb, on what."""
    name = _cut(attributes.user.name)
    if not attributes.resource_request:
        return f'User "{name}" cannot {attributes.verb} path "{_cut(attributes.path)}"'
    resource = attributes.resource
    if attributes.subresource:
        resource += "/" + attributes.subresource
    scope = (f'in the namespace "{_cut(attributes.namespace)}"' if attributes.namespace
             else "at the cluster scope")
    return (f'User "{name}" cannot {_cut(attributes.verb)} resource "{_cut(resource)}" in API '
            f'group "{_cut(attributes.api_group)}" {scope}')


def forbidden(attributes: attrs.Attributes, reason: str = "") -> errors.Forbidden:
    """The 403 ``Status`` kube-apiserver writes for a refused request (responsewriters.Forbidden
    and apierrors.NewForbidden): ``<resource>.<group> "<name>" is forbidden: User ...``."""
    text = _sanitize(forbidden_message(attributes))
    if reason:
        text = f"{text}: {_sanitize(_cut(reason))}"
    details: errors.StatusDetails = {}
    if attributes.resource_request:
        qualified = attributes.resource
        if attributes.api_group:
            qualified += "." + attributes.api_group
        if attributes.name:
            message = f'{qualified} "{_cut(attributes.name)}" is forbidden: {text}'
            details["name"] = _cut(attributes.name)
        else:
            message = f"{qualified} is forbidden: {text}"
        if attributes.api_group:
            details["group"] = attributes.api_group
        details["kind"] = attributes.resource
    else:
        message = f"forbidden: {text}"
    return errors.Forbidden(message, details=details)


def unavailable(attributes: attrs.Attributes, reason: str) -> errors.InternalError:
    """Fail closed: the decision could not be made (kube answers 500 Internal Server Error)."""
    return errors.InternalError(
        f'Internal Server Error: "{_cut(attributes.path)}": the request could not be authorized:'
        f" {_cut(reason)}")
