"""Calling a review API on kube-apiserver: one bounded attempt, retried only on a quick failure.

kube's delegated authenticators and authorizers use a 10 s client timeout and retry transient
failures with backoff from 500 ms (x1.5, jitter 0.2, 5 steps; ``DefaultAuthWebhookRetryBackoff``).
A timeout is not retried, so a review that hangs costs at most one timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

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


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    initial: float = 0.5
    factor: float = 1.5
    jitter: float = 0.2
    steps: int = 5

    def delays(self) -> list[float]:
        """The pauses between attempts (``steps - 1`` of them)."""
        out: list[float] = []
        delay = self.initial
        for _ in range(max(self.steps - 1, 0)):
            out.append(delay * (1 + self.jitter * random.random()))
            delay *= self.factor
        return out


DEFAULT_BACKOFF = Backoff()
NO_RETRY = Backoff(steps=1)


async def call(attempt: Callable[[], Awaitable[T]], *, timeout: float = DEFAULT_TIMEOUT,
               backoff: Backoff = DEFAULT_BACKOFF, sleep: Sleep = asyncio.sleep) -> T:
    delays = backoff.delays()
    while True:
        try:
            return await asyncio.wait_for(attempt(), timeout)
        except TimeoutError:
            raise Unavailable(f"no answer within {timeout:g}s", retriable=False) from None
        except Unavailable as exc:
            if not exc.retriable or not delays:
                raise
            await sleep(delays.pop(0))
