"""kube-apiserver's impersonation filter (``Impersonate-User``, ``-Group``, ``-Uid``,
``-Extra-<key>``; kubectl ``--as``), run after authentication and before authorization.

As apiserver's legacy ``WithImpersonation`` (endpoints/filters/impersonation.go): every part of
the wanted identity is authorized for the real caller with the verb ``impersonate``, in kube's
order: the user (``users`` in the core group named after it, or ``serviceaccounts`` ``<n>`` in
namespace ``<ns>`` for ``system:serviceaccount:<ns>:<n>``, whose groups then default to the
service-account groups), each group (``groups``), each extra value (``userextras/<key>``) and the
UID (``uids``), the last two in group ``authentication.k8s.io``. The first refusal is kube's 403
for those attributes. Groups, a UID or extras without a user are the 500 ``Internal Server Error:
"<uri>": requested [...] without impersonating a user`` that ``responsewriters.InternalError``
writes (text/plain). The impersonated user gets ``system:authenticated`` unless its groups name it
or ``system:unauthenticated`` (``system:anonymous`` gets ``system:unauthenticated``); its extras
are only the impersonated ones.

kube's newest sources (the ``impersonation`` package with the ConstrainedImpersonation modes of
KEP-5284) answer the user-less case with a 400 BadRequest Status and, when that gate is on, refuse
with the ``impersonate-on:<mode>:<verb>`` check first; this fixture keeps the legacy answers.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from urllib import parse

from devkit.controlplane import status
from devkit.controlplane.identity import (
    AUTHENTICATED,
    UNAUTHENTICATED,
    UserInfo,
)
from devkit.controlplane.rbac import Attributes, Policy

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
AUTHENTICATION_VERSION = "authentication.k8s.io/v1"
ANONYMOUS_NAME = "system:anonymous"
_SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class UserlessImpersonation(Exception):
    """Groups, a UID or extras were asked for without a user: kube's 500, as text."""

    def __init__(self, request_uri: str, requests: Iterable[Reference]) -> None:
        listed = " ".join(reference.go_value() for reference in requests)
        self.text = _sanitized(
            f"Internal Server Error: {go_quote(request_uri)}: requested [{listed}] without "
            "impersonating a user"
        )
        super().__init__(self.text)


@dataclasses.dataclass(frozen=True)
class Reference:
    """One part of the wanted identity, as kube's ``v1.ObjectReference`` carries it."""

    kind: str  # User, ServiceAccount, Group, UserExtra or UID
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""

    def go_value(self) -> str:
        """Go's ``%v`` of the ObjectReference: its seven fields space-separated in braces."""
        fields = (self.kind, self.namespace, self.name, "", self.api_version, "",
                  self.field_path)  # fmt: skip
        return "{" + " ".join(fields) + "}"

    def attributes(self, requestor: UserInfo) -> Attributes:
        # the core kinds carry no apiVersion, so kube authorizes them with an empty version
        group, version = (AUTHENTICATION_GROUP, "v1") if self.api_version else ("", "")
        resource, subresource = {
            "User": ("users", ""), "ServiceAccount": ("serviceaccounts", ""),
            "Group": ("groups", ""), "UserExtra": ("userextras", self.field_path),
            "UID": ("uids", ""),
        }[self.kind]  # fmt: skip
        return Attributes(
            user=requestor, verb="impersonate", resource_request=True,
            namespace=self.namespace, group=group, version=version, resource=resource,
            subresource=subresource, name=self.name,
        )  # fmt: skip


def requested(headers: Iterable[tuple[str, str]], request_uri: str) -> list[Reference]:
    """The parts the ``Impersonate-*`` headers ask for (empty when they ask for none), in the
    order kube authorizes them; raises UserlessImpersonation for parts without a user."""
    pairs = [(name.lower(), value) for name, value in headers]
    user = next((value for name, value in pairs if name == USER_HEADER), "")
    references: list[Reference] = []
    if user:
        service_account = _split_service_account(user)
        if service_account is not None:
            references.append(Reference("ServiceAccount", service_account[1],
                                        namespace=service_account[0]))  # fmt: skip
        else:
            references.append(Reference("User", user))
    references += [Reference("Group", value) for name, value in pairs if name == GROUP_HEADER]
    extras: dict[str, list[str]] = {}
    for name, value in pairs:
        if name.startswith(EXTRA_PREFIX):
            extras.setdefault(name[len(EXTRA_PREFIX):], []).append(value)
    for key, values in extras.items():
        references += [Reference("UserExtra", value, api_version=AUTHENTICATION_VERSION,
                                 field_path=_unescape(key)) for value in values]  # fmt: skip
    uid = next((value for name, value in pairs if name == UID_HEADER), "")
    if uid:
        references.append(Reference("UID", uid, api_version=AUTHENTICATION_VERSION))
    if references and not user:
        raise UserlessImpersonation(request_uri, references)
    return references


def impersonate(requestor: UserInfo, references: list[Reference], policy: Policy) -> UserInfo:
    """The identity to act as once every part is allowed; raises the 403 StatusError of the
    first part refused."""
    groups_specified = any(reference.kind == "Group" for reference in references)
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, tuple[str, ...]] = {}
    for reference in references:
        attrs = reference.attributes(requestor)
        decision = policy.authorize(attrs)
        if not decision.allowed:
            raise status.StatusError(status.forbidden(attrs, decision.reason))
        if reference.kind == "ServiceAccount":
            name = f"{_SERVICE_ACCOUNT_PREFIX}{reference.namespace}:{reference.name}"
            if not groups_specified:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{reference.namespace}"]
        elif reference.kind == "User":
            name = reference.name
        elif reference.kind == "Group":
            groups.append(reference.name)
        elif reference.kind == "UserExtra":
            extra[reference.field_path] = (*extra.get(reference.field_path, ()), reference.name)
        else:
            uid = reference.name
    if name != ANONYMOUS_NAME:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    return UserInfo(name=name, uid=uid, groups=tuple(groups), extra=extra)


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (strconv.Quote) for the texts a request URI holds."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


def _sanitized(text: str) -> str:
    """responsewriters' sanitizer: ``&``, ``<`` and ``>`` as HTML entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unescape(key: str) -> str:
    """``url.PathUnescape`` of the lower-cased key; a malformed escape keeps the raw key."""
    if _ESCAPE.search(key):
        return key
    try:
        return parse.unquote(key, errors="strict")
    except UnicodeDecodeError:
        return key


def _split_service_account(user: str) -> tuple[str, str] | None:
    """serviceaccount.SplitUsername: ``system:serviceaccount:<ns>:<name>`` with a valid
    namespace (DNS-1123 label) and name (DNS-1123 subdomain); anything else is a plain user."""
    if not user.startswith(_SERVICE_ACCOUNT_PREFIX):
        return None
    parts = user[len(_SERVICE_ACCOUNT_PREFIX):].split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if len(namespace) > 63 or not _LABEL.fullmatch(namespace):
        return None
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        return None
    return namespace, name
