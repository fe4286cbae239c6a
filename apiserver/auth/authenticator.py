"""Who is calling: the ``Authenticator`` seam and kube's way of combining authenticators.

An authenticator looks at a ``Credentials`` (the request's headers and the verified TLS peer chain)
and answers with an ``Outcome``: a user, no opinion (it found nothing it understands), or an error
(it found a credential and the credential is bad). ``Chain`` combines them the way
kube-apiserver's delegating authenticator does (authenticatorfactory/delegating.go):

1. the first authenticator that finds a user wins;
2. if none did and any of them failed, the request is unauthenticated (401);
3. if none had an opinion, the request is anonymous (when anonymous access is on) and otherwise
   unauthenticated;
4. every authenticated user gets ``system:authenticated`` (kube's AuthenticatedGroupAdder).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Protocol

from apiserver.auth import user as users


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    """What a request presents: header values by lower-case name, and the TLS peer chain.

    ``peer_chain`` is the chain the TLS layer verified (leaf first, DER), empty when the client
    sent no certificate; it is never taken from a header.
    """

    headers: dict[str, list[str]]
    peer_chain: tuple[bytes, ...] = ()

    def first(self, name: str) -> str:
        values = self.headers.get(name)
        return values[0] if values else ""

    @classmethod
    def from_asgi(cls, raw_headers: Iterable[tuple[bytes, bytes]],
                  peer_chain: tuple[bytes, ...] = ()) -> Credentials:
        headers: dict[str, list[str]] = {}
        for name, value in raw_headers:
            # Go sends user names as raw UTF-8 bytes; a bad sequence becomes U+FFFD, not a 500
            key = name.decode("latin-1").lower()
            text = value.decode("utf-8", "replace")
            found = headers.get(key)
            if found is None:
                headers[key] = [text]
            else:
                found.append(text)
        return cls(headers=headers, peer_chain=peer_chain)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    user: users.UserInfo | None = None
    error: str = ""
    """Why a presented credential was refused (for the log; never a secret)."""


NO_OPINION = Outcome()


def failed(reason: str) -> Outcome:
    return Outcome(error=reason)


class Authenticator(Protocol):
    async def authenticate(self, credentials: Credentials) -> Outcome: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """The chain's answer: a user (possibly anonymous), or None with the errors behind a 401."""

    user: users.UserInfo | None
    errors: tuple[str, ...] = ()


class Chain:
    def __init__(self, authenticators: Sequence[Authenticator], *, anonymous: bool = True) -> None:
        self.authenticators = tuple(authenticators)
        self.anonymous = anonymous

    async def authenticate(self, credentials: Credentials) -> Result:
        errors: list[str] = []
        for authenticator in self.authenticators:
            outcome = await authenticator.authenticate(credentials)
            if outcome.user is not None:
                found = outcome.user
                if not found.anonymous:
                    found = found.with_group(users.AUTHENTICATED)
                return Result(found)
            if outcome.error:
                errors.append(outcome.error)
        if errors or not self.anonymous:
            return Result(None, tuple(errors))
        return Result(users.ANONYMOUS_USER)
