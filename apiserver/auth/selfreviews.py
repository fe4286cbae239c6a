"""What standalone mode's self reviews answer: the ``status`` of a SelfSubjectAccessReview, a
SelfSubjectRulesReview and a SelfSubjectReview, decided by the authorizer and the local RBAC
rules that judge every request (``endpoints.selfreviews`` reads the bodies and serves them).

The shapes are kube-apiserver's (``protocols/kube-samples``): an access status is ``allowed``,
``denied`` only when an authorizer denied outright, ``reason`` and ``evaluationError`` only when
set; a rule leaves out its empty lists; a user leaves out an empty ``uid`` and ``extra``
(Go's ``omitempty`` throughout).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer, rbac
from apiserver.auth import user as users
from openapi import fields


class _AccessStatus(TypedDict):
    allowed: bool


class AccessStatus(_AccessStatus, total=False):
    denied: bool
    reason: str
    evaluationError: str


class _Verbs(TypedDict):
    verbs: list[str]


class ResourceRule(_Verbs, total=False):
    apiGroups: list[str]
    resources: list[str]
    resourceNames: list[str]


class NonResourceRule(_Verbs, total=False):
    nonResourceURLs: list[str]


class RulesStatus(TypedDict):
    resourceRules: list[ResourceRule]
    nonResourceRules: list[NonResourceRule]
    incomplete: bool


class _UserName(TypedDict):
    username: str


class UserInfo(_UserName, users.WireIdentity, total=False):
    """A SelfSubjectReview's ``status.userInfo``."""


async def access(judge: authorizer.Authorizer, target: attrs.Attributes) -> AccessStatus:
    """May ``target.user`` do ``target``? Asked of the authorizer every request passes."""
    verdict = await judge.authorize(target)
    status: AccessStatus = {"allowed": verdict.allowed}
    if verdict.decision is authorizer.Decision.DENY:
        status["denied"] = True
    if verdict.reason:
        status["reason"] = fields.cut(verdict.reason)
    if verdict.error:
        status["evaluationError"] = fields.cut(verdict.error)
    return status


def rules(granted: Sequence[rbac.Rule]) -> RulesStatus:
    """The caller's rules as a rules review lists them. The local policy is all there is to
    read, so the list is never ``incomplete``."""
    status: RulesStatus = {"resourceRules": [], "nonResourceRules": [], "incomplete": False}
    for rule in granted:
        if rule.non_resource_urls:
            status["nonResourceRules"].append(
                {"verbs": list(rule.verbs), "nonResourceURLs": list(rule.non_resource_urls)})
            continue
        shown: ResourceRule = {"verbs": list(rule.verbs)}
        if rule.api_groups:
            shown["apiGroups"] = list(rule.api_groups)
        if rule.resources:
            shown["resources"] = list(rule.resources)
        if rule.resource_names:
            shown["resourceNames"] = list(rule.resource_names)
        status["resourceRules"].append(shown)
    return status


def user_info(user: users.UserInfo) -> UserInfo:
    """Who the caller is, after impersonation (``status.userInfo`` of a SelfSubjectReview)."""
    info: UserInfo = {"username": user.name}
    return user.wire(info)
