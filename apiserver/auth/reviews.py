"""The wire bodies of the review APIs kube-apiserver serves (``authentication.k8s.io/v1``,
``authorization.k8s.io/v1``), built and parsed here so every caller agrees on them.

TokenReview (token + audiences -> user), SubjectAccessReview (user + attributes -> allowed),
SelfSubjectReview (the caller's own user). Field names and absent-field handling follow the
recorded samples in ``protocols/kube-samples`` (e.g. a refused TokenReview has no
``authenticated`` at all, only ``error``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

from apiserver.auth import attributes as attrs
from apiserver.auth import user as users

AUTHENTICATION_V1 = "authentication.k8s.io/v1"
AUTHORIZATION_V1 = "authorization.k8s.io/v1"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class ResourceAttributes(TypedDict, total=False):
    namespace: str
    verb: str
    group: str
    version: str
    resource: str
    subresource: str
    name: str


class NonResourceAttributes(TypedDict):
    path: str
    verb: str


class AccessReviewSpec(users.WireIdentity, total=False):
    resourceAttributes: ResourceAttributes
    nonResourceAttributes: NonResourceAttributes
    user: str


@dataclasses.dataclass(frozen=True, slots=True)
class TokenReviewStatus:
    authenticated: bool
    user: users.UserInfo | None = None
    audiences: tuple[str, ...] = ()
    error: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class AccessReviewStatus:
    allowed: bool
    denied: bool = False
    reason: str = ""
    evaluation_error: str = ""


def token_review(token: str, audiences: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences:
        spec["audiences"] = list(audiences)
    return {"apiVersion": AUTHENTICATION_V1, "kind": "TokenReview", "spec": spec}


def access_review_spec(attributes: attrs.Attributes) -> AccessReviewSpec:
    """The spec kube's webhook authorizer sends; empty fields are left out (``omitempty``)."""
    spec: AccessReviewSpec = {}
    if attributes.resource_request:
        resource: ResourceAttributes = {}
        for key, value in (("namespace", attributes.namespace), ("verb", attributes.verb),
                           ("group", attributes.api_group), ("version", attributes.api_version),
                           ("resource", attributes.resource),
                           ("subresource", attributes.subresource), ("name", attributes.name)):
            if value:
                resource[key] = value  # type: ignore[literal-required]
        spec["resourceAttributes"] = resource
    else:
        spec["nonResourceAttributes"] = {"path": attributes.path, "verb": attributes.verb}
    if attributes.user.name:
        spec["user"] = attributes.user.name
    return attributes.user.wire(spec)


def access_review(spec: AccessReviewSpec) -> dict[str, Any]:
    return {"apiVersion": AUTHORIZATION_V1, "kind": "SubjectAccessReview", "spec": dict(spec)}


def user_info(body: Any) -> users.UserInfo | None:
    """A ``UserInfo`` object (TokenReview ``status.user``, SelfSubjectReview ``userInfo``)."""
    if not isinstance(body, dict):
        return None
    name = body.get("username")
    if not isinstance(name, str) or not name:
        return None
    uid = body.get("uid") if isinstance(body.get("uid"), str) else ""
    groups = body.get("groups") or []
    extra = body.get("extra") or {}
    return users.UserInfo(
        name=name,
        uid=uid or "",
        groups=tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        extra={str(k): tuple(v for v in vs if isinstance(v, str))
               for k, vs in extra.items() if isinstance(vs, list)}
        if isinstance(extra, dict) else {},
    )


def parse_token_review(body: Any) -> TokenReviewStatus:
    status = body.get("status") if isinstance(body, dict) else None
    if not isinstance(status, dict):
        return TokenReviewStatus(authenticated=False, error="the TokenReview has no status")
    error = status.get("error")
    auds = status.get("audiences") or []
    return TokenReviewStatus(
        authenticated=status.get("authenticated") is True,
        user=user_info(status.get("user")),
        audiences=tuple(a for a in auds if isinstance(a, str)) if isinstance(auds, list) else (),
        error=error if isinstance(error, str) else "",
    )


def parse_access_review(body: Any) -> AccessReviewStatus:
    status = body.get("status") if isinstance(body, dict) else None
    if not isinstance(status, dict):
        return AccessReviewStatus(allowed=False, evaluation_error="no status")
    reason = status.get("reason")
    evaluation = status.get("evaluationError")
    return AccessReviewStatus(
        allowed=status.get("allowed") is True,
        denied=status.get("denied") is True,
        reason=reason if isinstance(reason, str) else "",
        evaluation_error=evaluation if isinstance(evaluation, str) else "",
    )
