"""Impersonation: ``Impersonate-User``, ``-Group``, ``-Uid``, ``-Extra-<key>`` (kubectl ``--as``).

As kube-apiserver's impersonation filter (legacy mode): each part of the wanted identity is
authorized for the real caller with the verb ``impersonate``:

- the user as ``users`` (core group) named after it, or, for ``system:serviceaccount:<ns>:<n>``,
  ``serviceaccounts`` ``<n>`` in namespace ``<ns>`` (whose groups then default to the
  service-account groups);
- every group as ``groups``; the UID as ``uids`` and every extra value as ``userextras/<key>``
  (group ``authentication.k8s.io``).

Groups, UID or extras without a user are an error. The result gets ``system:authenticated``
(``system:unauthenticated`` for ``system:anonymous``). A refusal is kube's 403. In standalone mode
the local policy answers, so only the admin (``system:masters``) may impersonate.
"""

from __future__ import annotations

import dataclasses

from apiserver import errors
from apiserver.auth import attributes as attrs
from apiserver.auth import authenticator, authorizer, requestheader
from apiserver.auth import user as users

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"


def requested(credentials: authenticator.Credentials) -> users.UserInfo | None:
    """The identity the headers ask for, None when they ask for none; 500 when they ask for
    groups, a UID or extras without a user (as kube answers)."""
    headers = credentials.headers
    if not any(header.startswith("impersonate-") for header in headers):
        return None  # the common case, decided in one pass
    name = credentials.first(USER_HEADER)
    uid = credentials.first(UID_HEADER)
    groups = tuple(headers.get(GROUP_HEADER, ()))
    extra: dict[str, list[str]] = {}
    for header, values in headers.items():
        if header.startswith(EXTRA_PREFIX) and len(header) > len(EXTRA_PREFIX):
            extra.setdefault(requestheader.unescape_key(header[len(EXTRA_PREFIX):]),
                             []).extend(values)
    if not name:
        if uid or groups or extra:
            raise errors.InternalError(
                "Internal Server Error: impersonation requested groups, a UID or extras "
                "without impersonating a user name")
        return None
    return users.UserInfo(name=name, uid=uid, groups=groups,
                          extra={k: tuple(v) for k, v in extra.items()})


def _attributes(requestor: users.UserInfo, group: str, resource: str, name: str, *,
                namespace: str = "", subresource: str = "") -> attrs.Attributes:
    return attrs.Attributes(
        user=requestor, verb="impersonate", path="", resource_request=True, api_group=group,
        api_version="v1", namespace=namespace, resource=resource, subresource=subresource,
        name=name,
    )  # fmt: skip


async def impersonate(requestor: users.UserInfo, wanted: users.UserInfo,
                      judge: authorizer.Authorizer) -> users.UserInfo:
    """The identity to act as, once every part of it is allowed; raises the 403 (or the 500 of
    an outage) otherwise."""
    checks: list[attrs.Attributes] = []
    actual = wanted
    service_account = users.split_service_account(wanted.name)
    if service_account is not None:
        namespace, name = service_account
        checks.append(_attributes(requestor, "", "serviceaccounts", name, namespace=namespace))
        if not wanted.groups:
            actual = dataclasses.replace(actual, groups=users.service_account_groups(namespace))
    else:
        checks.append(_attributes(requestor, "", "users", wanted.name))
    if wanted.uid:
        checks.append(_attributes(requestor, AUTHENTICATION_GROUP, "uids", wanted.uid))
    checks.extend(_attributes(requestor, "", "groups", group) for group in wanted.groups)
    for key, values in wanted.extra.items():
        checks.extend(_attributes(requestor, AUTHENTICATION_GROUP, "userextras", value,
                                  subresource=key) for value in values)
    for check in checks:
        verdict = await judge.authorize(check)
        if verdict.allowed:
            continue
        if verdict.error:
            raise authorizer.unavailable(check, verdict.error)
        raise authorizer.forbidden(check, verdict.reason)
    if actual.anonymous:
        return actual.with_group(users.UNAUTHENTICATED)
    return actual.with_group(users.AUTHENTICATED)
