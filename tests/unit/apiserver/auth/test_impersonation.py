"""Impersonation: every part authorized with the verb impersonate, as kube-apiserver does."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.auth import attributes, authenticator, authorizer, impersonation
from apiserver.auth import user as users

ADMIN = users.UserInfo("admin", groups=(users.MASTERS, users.AUTHENTICATED))
BOB = users.UserInfo("bob", groups=(users.AUTHENTICATED,))


class Recorder:
    """Allows what ``allow`` says and records every impersonation check."""

    def __init__(self, allow: bool = True, error: str = "") -> None:
        self.allow = allow
        self.error = error
        self.asked: list[attributes.Attributes] = []

    async def authorize(self, a: attributes.Attributes) -> authorizer.Verdict:
        self.asked.append(a)
        if self.error:
            return authorizer.Verdict(authorizer.Decision.NO_OPINION, error=self.error)
        return authorizer.ALLOW if self.allow else authorizer.NO_OPINION


def _wanted(headers: dict[str, list[str]]) -> users.UserInfo | None:
    return impersonation.requested(authenticator.Credentials(headers))


def test_headers_are_read_like_kube() -> None:
    assert _wanted({}) is None
    wanted = _wanted({"impersonate-user": ["alice"], "impersonate-group": ["tenants", "x,y"],
                      "impersonate-uid": ["u-1"],
                      "impersonate-extra-authentication.kubernetes.io%2fpod-name": ["p"],
                      "impersonate-extra-Scopes": ["a", "b"]})
    assert wanted == users.UserInfo("alice", uid="u-1", groups=("tenants", "x,y"), extra={
        "authentication.kubernetes.io/pod-name": ("p",), "scopes": ("a", "b")})


@pytest.mark.parametrize("headers", [
    {"impersonate-group": ["g"]}, {"impersonate-uid": ["u"]}, {"impersonate-extra-k": ["v"]},
])  # fmt: skip
def test_parts_without_a_user_are_an_error(headers: dict[str, list[str]]) -> None:
    with pytest.raises(errors.InternalError, match="without impersonating a user name"):
        _wanted(headers)


async def test_every_part_is_checked_with_kubes_attributes() -> None:
    judge = Recorder()
    wanted = users.UserInfo("alice", uid="u-1", groups=("tenants",),
                            extra={"scopes": ("a", "b")})
    found = await impersonation.impersonate(ADMIN, wanted, judge)
    assert found == users.UserInfo("alice", uid="u-1", groups=("tenants", users.AUTHENTICATED),
                                   extra={"scopes": ("a", "b")})
    checks = [(a.verb, a.api_group, a.resource, a.subresource, a.name, a.namespace)
              for a in judge.asked]
    assert checks == [
        ("impersonate", "", "users", "", "alice", ""),
        ("impersonate", "authentication.k8s.io", "uids", "", "u-1", ""),
        ("impersonate", "", "groups", "", "tenants", ""),
        ("impersonate", "authentication.k8s.io", "userextras", "scopes", "a", ""),
        ("impersonate", "authentication.k8s.io", "userextras", "scopes", "b", ""),
    ]
    assert all(a.user is ADMIN for a in judge.asked)


async def test_a_service_account_gets_its_groups() -> None:
    judge = Recorder()
    wanted = users.UserInfo("system:serviceaccount:gpustack-system:model-manager-node")
    found = await impersonation.impersonate(ADMIN, wanted, judge)
    assert found.groups == ("system:serviceaccounts", "system:serviceaccounts:gpustack-system",
                            users.AUTHENTICATED)
    [check] = judge.asked
    assert (check.resource, check.namespace, check.name) == (
        "serviceaccounts", "gpustack-system", "model-manager-node")


async def test_anonymous_stays_unauthenticated() -> None:
    found = await impersonation.impersonate(ADMIN, users.UserInfo(users.ANONYMOUS), Recorder())
    assert found.groups == (users.UNAUTHENTICATED,)


async def test_a_refusal_is_kubes_403() -> None:
    with pytest.raises(errors.Forbidden) as refused:
        await impersonation.impersonate(BOB, users.UserInfo("alice"), Recorder(allow=False))
    assert refused.value.message == (
        'users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API '
        'group "" at the cluster scope')


async def test_an_outage_fails_closed() -> None:
    with pytest.raises(errors.InternalError):
        await impersonation.impersonate(BOB, users.UserInfo("alice"), Recorder(error="down"))
