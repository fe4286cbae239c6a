"""Bearer tokens: ``Authorization: Bearer <token>`` checked by one or more token authenticators.

As kube's ``bearertoken`` wrapper: no header, another scheme or an empty token is no opinion; a
token that no token authenticator accepts is an error (401 ``Unauthorized``), never anonymous.
The token never reaches a log or a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from apiserver.auth import authenticator
from apiserver.auth import user as users

INVALID = "invalid bearer token"


class TokenAuthenticator(Protocol):
    async def authenticate_token(self, token: str) -> authenticator.Outcome: ...


def token_of(credentials: authenticator.Credentials) -> str:
    header = credentials.first("authorization").strip()
    if not header:
        return ""
    parts = header.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]


class Bearer:
    def __init__(self, authenticators: Sequence[TokenAuthenticator]) -> None:
        self.authenticators = tuple(authenticators)

    async def authenticate(self, credentials: authenticator.Credentials) -> authenticator.Outcome:
        token = token_of(credentials)
        if not token:
            return authenticator.NO_OPINION
        errors: list[str] = []
        for each in self.authenticators:
            outcome = await each.authenticate_token(token)
            if outcome.user is not None:
                return outcome
            if outcome.error:
                errors.append(outcome.error)
        return authenticator.failed("; ".join(errors) if errors else INVALID)


class StaticTokens:
    """Tokens from a token file (``apiserver.auth.static``)."""

    def __init__(self, lookup: TokenLookup) -> None:
        self.lookup = lookup

    async def authenticate_token(self, token: str) -> authenticator.Outcome:
        found = self.lookup.find(token)
        return authenticator.Outcome(found) if found is not None else authenticator.NO_OPINION


class TokenLookup(Protocol):
    def find(self, token: str) -> users.UserInfo | None: ...
