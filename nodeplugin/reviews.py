"""Who is calling the plugin's HTTPS port: a TokenReview of the caller's bearer token.

In a cluster ``GET /model/downloads`` (and ``POST /model/prefetches``) is for the worker's identity
only. The plugin does not judge tokens itself: it asks kube-apiserver (``TokenReview`` through
``kube.Client``) for the plugin port's own audience (``worker_calls``: ``openapi.plugin.AUDIENCE``,
so the worker's API token is refused and what the worker sends cannot be replayed against
kube-apiserver) and admits the answer's user name when it is ``--worker-user``. Answers are
kept for ten seconds, keyed by the token's SHA-256 (the token itself is never kept, logged or put
in a message), so a worker polling every node does not cost a review per request.

A review answers an ``Identity``: the user, and which holder of it the token was made for (the
Pod's UID a projected token is bound to, else its node; kube-apiserver puts both in the user's
extra), so the peer port can count one plugin's requests apart from another's though every
plugin runs as the same ServiceAccount.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Sequence
from typing import Protocol

from lightkube.models.authentication_v1 import TokenReviewSpec
from lightkube.resources.authentication_v1 import TokenReview

import kube
from openapi import plugin
from timing import clock as clocks

log = logging.getLogger(__name__)

TTL_SECONDS = 10.0
MAX_CACHED = 1024


POD_UID = "authentication.kubernetes.io/pod-uid"
NODE_NAME = "authentication.kubernetes.io/node-name"
MAX_INSTANCE = 253


class ReviewFailed(Exception):
    """The review could not be made (the API is unreachable or refused it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Identity:
    user: str
    instance: str = ""
    """The Pod UID a bound token was made for (``pod:<uid>``), else its node (``node:<name>``);
    "" for a token bound to neither."""

    @property
    def key(self) -> str:
        """One holder of the user: what per-caller limits count by."""
        return f"{self.user} {self.instance}" if self.instance else self.user


class Reviewer(Protocol):
    async def user_of(self, token: str) -> str | None:
        """The user the token authenticates, None when it does not; ``ReviewFailed``."""
        ...

    async def identity_of(self, token: str) -> Identity | None:
        """``user_of`` with the holder the token was bound to; ``ReviewFailed``."""
        ...


def _instance(extra: dict[str, list[str]] | None) -> str:
    for key, kind in ((POD_UID, "pod"), (NODE_NAME, "node")):
        values = (extra or {}).get(key) or []
        if len(values) == 1 and isinstance(values[0], str) and values[0]:
            return f"{kind}:{values[0][:MAX_INSTANCE]}"
    return ""


class TokenReviewer:
    def __init__(self, client: kube.Client, *, clock: clocks.Clock,
                 ttl: float = TTL_SECONDS, audiences: Sequence[str] = ()) -> None:
        """``audiences``: review for these (a peer token's own audience) instead of the API
        server's."""
        self._client = client
        self._audiences = list(audiences)
        self._clock = clock
        self._ttl = ttl
        self._cache: dict[str, tuple[float, Identity | None]] = {}
        self.reviews = 0

    async def user_of(self, token: str) -> str | None:
        found = await self.identity_of(token)
        return found.user if found is not None else None

    async def identity_of(self, token: str) -> Identity | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        try:
            spec = TokenReviewSpec(token=token, audiences=self._audiences or None)
            answer = await self._client.create(TokenReview(spec=spec))
        except kube.KubeError as exc:
            raise ReviewFailed(f"the TokenReview failed: {exc.reason}") from None
        self.reviews += 1
        result = answer.status
        user: Identity | None = None
        if (result is not None and result.authenticated and result.user is not None
                and result.user.username):
            user = Identity(result.user.username, _instance(result.user.extra))
        if len(self._cache) >= MAX_CACHED:
            self._cache = {k: v for k, v in self._cache.items() if now - v[0] < self._ttl}
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
        self._cache[key] = (now, user)
        return user


def worker_calls(client: kube.Client, clock: clocks.Clock) -> TokenReviewer:
    """The reviewer of the worker's calls to the plugin's HTTPS port: tokens for
    ``openapi.plugin.AUDIENCE`` only (as the peer port reviews for its own audience)."""
    return TokenReviewer(client, clock=clock, audiences=[plugin.AUDIENCE])
