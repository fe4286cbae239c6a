"""Who calls the fixture control plane, and the token table the tests set."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
API_AUDIENCE = "https://kubernetes.default.svc"

EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@dataclasses.dataclass(frozen=True)
class UserInfo:
    """kube's user.Info: name, uid, groups and extra (each extra key a list of values)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def authenticated(self) -> UserInfo:
        """With ``system:authenticated`` appended, as kube's group adder does."""
        if AUTHENTICATED in self.groups or self.name == "system:anonymous":
            return self
        return dataclasses.replace(self, groups=(*self.groups, AUTHENTICATED))

    def wire(self) -> dict[str, Any]:
        """As TokenReview/SelfSubjectReview write it (empty fields omitted)."""
        body: dict[str, Any] = {"username": self.name}
        if self.uid:
            body["uid"] = self.uid
        if self.groups:
            body["groups"] = list(self.groups)
        if self.extra:
            body["extra"] = {key: list(values) for key, values in sorted(self.extra.items())}
        return body


ANONYMOUS = UserInfo("system:anonymous", groups=(UNAUTHENTICATED,))


@dataclasses.dataclass(frozen=True)
class Token:
    """A token the control plane accepts. ``audiences`` None: a static token (audience-agnostic,
    valid for the API audience); a tuple: a bound ServiceAccount token valid only for those."""

    user: UserInfo
    audiences: tuple[str, ...] | None = None

    def valid_for(self, targets: Sequence[str]) -> bool:
        """Whether a request to an API server of audiences ``targets`` accepts it (a static
        token: always, as kube-apiserver accepts its static tokens for its own audiences)."""
        return self.audiences is None or any(a in self.audiences for a in targets)


def service_account(
    namespace: str,
    name: str,
    *,
    uid: str,
    pod: tuple[str, str] | None = None,
    node: tuple[str, str] | None = None,
    credential_id: str | None = None,
) -> UserInfo:
    """A ServiceAccount user as kube's bound-token authenticator builds it: ``pod`` and ``node``
    are (name, uid) pairs and become the pod-/node- extras, ``credential_id`` the ``JTI=...``."""
    extra: dict[str, tuple[str, ...]] = {}
    if credential_id is not None:
        extra[EXTRA_CREDENTIAL_ID] = (f"JTI={credential_id}",)
    if node is not None:
        extra[EXTRA_NODE_NAME] = (node[0],)
        extra[EXTRA_NODE_UID] = (node[1],)
    if pod is not None:
        extra[EXTRA_POD_NAME] = (pod[0],)
        extra[EXTRA_POD_UID] = (pod[1],)
    return UserInfo(
        name=f"system:serviceaccount:{namespace}:{name}",
        uid=uid,
        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
        extra=extra,
    )


def go_quote_list(values: Sequence[str]) -> str:
    """Go's ``%q`` of a []string: ``["a" "b"]``."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "[" + " ".join(quoted) + "]"
