"""Bearer tokens checked by kube-apiserver with a TokenReview, cached.

As kube's delegated token authenticator (plugin/pkg/authenticator/token/webhook, token/cache):

- ``spec.audiences`` is sent only when the server has API audiences (``--api-audiences``); then
  the answer's ``status.audiences`` (or, when absent, the server's own audiences) must intersect
  them, or the token gives no identity;
- ``authenticated: false`` with an ``error`` is an error; without one, no opinion; both end as
  401 at the bearer layer;
- a found user and a plain "not authenticated" are both kept ``success_ttl`` / ``failure_ttl``
  (10 s each by default); errors and outages are not cached;
- the cache key is an HMAC of the token under a secret made at start, so the cache never holds a
  token, and the cache holds at most ``max_entries`` answers, however many tokens are tried;
- one bounded attempt (10 s), retried with backoff only on quick transient failures; an outage is
  an error (401), logged without the token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from typing import Protocol

from apiserver.auth import authenticator, cache, reviews, webhook

log = logging.getLogger(__name__)

DEFAULT_TTL = 10.0
DEFAULT_MAX_ENTRIES = 8192


class TokenReviewer(Protocol):
    """One TokenReview; raises ``webhook.Unavailable`` when it cannot be made."""

    async def review(self, token: str, audiences: tuple[str, ...]
                     ) -> reviews.TokenReviewStatus: ...


class TokenReview:
    def __init__(
        self,
        reviewer: TokenReviewer,
        *,
        audiences: tuple[str, ...] = (),
        success_ttl: float = DEFAULT_TTL,
        failure_ttl: float = DEFAULT_TTL,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        calls: webhook.Calls = webhook.DEFAULT_CALLS,
        clock: cache.Clock | None = None,
    ) -> None:
        self.reviewer = reviewer
        self.audiences = audiences
        self.success_ttl = success_ttl
        self.failure_ttl = failure_ttl
        self.calls = calls
        self.cache: cache.ExpiringCache[bytes, authenticator.Outcome] = cache.ExpiringCache(
            max_entries, clock=clock or time.monotonic)
        self._secret = secrets.token_bytes(32)

    def key(self, token: str) -> bytes:
        material = token.encode() + b"\x00" + "\x00".join(self.audiences).encode()
        return hmac.new(self._secret, material, hashlib.sha256).digest()

    async def authenticate_token(self, token: str) -> authenticator.Outcome:
        return await self.cache.get_or_compute(self.key(token), lambda: self._review(token),
                                               self._ttl)

    def _ttl(self, outcome: authenticator.Outcome) -> float:
        if outcome.user is not None:
            return self.success_ttl
        return 0.0 if outcome.error else self.failure_ttl

    async def _review(self, token: str) -> authenticator.Outcome:
        try:
            status = await self.calls.call(lambda: self.reviewer.review(token, self.audiences))
        except webhook.Unavailable as exc:
            log.warning("TokenReview failed, the request is unauthenticated: %s", exc.reason)
            return authenticator.failed(f"token review unavailable: {exc.reason}")
        if not status.authenticated:
            if status.error:
                return authenticator.failed(status.error[:256])
            return authenticator.NO_OPINION
        if status.user is None:
            return authenticator.failed("the TokenReview answer names no user")
        if self.audiences:
            got = status.audiences or self.audiences
            if not set(got) & set(self.audiences):
                return authenticator.NO_OPINION
        return authenticator.Outcome(status.user)
