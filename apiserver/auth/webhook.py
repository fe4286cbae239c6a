"""Calling a review API on kube-apiserver: one bounded attempt, retried only on a quick failure.

kube's delegated authenticators and authorizers use a 10 s client timeout and retry transient
failures with backoff from 500 ms (x1.5, jitter 0.2, 5 steps; ``DefaultAuthWebhookRetryBackoff``).
A timeout is not retried, so a review that hangs costs at most one timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TypeVar

from timing import backoff as backoffs

T = TypeVar("T")
DEFAULT_TIMEOUT = 10.0

Sleep = Callable[[float], Awaitable[None]]


class Unavailable(Exception):
    """The review could not be made: kube-apiserver unreachable, timed out or answering 5xx.

    The message is short and fixed-form (no URL, no body, no token)."""

    def __init__(self, reason: str, *, retriable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retriable = retriable


PAUSES = backoffs.Backoff(0.5, factor=1.5, jitter=0.2)
"""kube's ``DefaultAuthWebhookRetryBackoff``: 500 ms, x1.5, each stretched by up to 20%."""


@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """How a review call is retried: ``attempts`` tries in all, ``pauses`` between them."""

    attempts: int = 5
    pauses: backoffs.Backoff = PAUSES


DEFAULT_RETRY = Retry()
NO_RETRY = Retry(attempts=1)


async def call(attempt: Callable[[], Awaitable[T]], *, timeout: float = DEFAULT_TIMEOUT,
               backoff: Retry = DEFAULT_RETRY, sleep: Sleep = asyncio.sleep) -> T:
    delays = backoff.pauses.delays(backoff.attempts)
    while True:
        try:
            return await asyncio.wait_for(attempt(), timeout)
        except TimeoutError:
            raise Unavailable(f"no answer within {timeout:g}s", retriable=False) from None
        except Unavailable as exc:
            if not exc.retriable or not delays:
                raise
            await sleep(delays.pop(0))


@dataclasses.dataclass(frozen=True, slots=True)
class Calls:
    """How a reviewer calls kube-apiserver: each attempt within ``timeout`` seconds, retried as
    ``retry`` says (the TokenReview and SubjectAccessReview clients hold one each)."""

    timeout: float = DEFAULT_TIMEOUT
    retry: Retry = DEFAULT_RETRY

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        return await call(attempt, timeout=self.timeout, backoff=self.retry)


DEFAULT_CALLS = Calls()
