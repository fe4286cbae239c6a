"""A bounded cache of expiring answers, with one in-flight computation per key.

Used for TokenReview and SubjectAccessReview answers. Entries live for the TTL their outcome
chooses (kube: 10 s allowed, 10 s denied); the least recently used entry is dropped when the cache
is full, so a flood of distinct keys never grows memory past ``max_entries``. Concurrent misses on
one key share a single computation (kube's singleflight), so a burst of identical requests makes
one review, not hundreds.

Callers choose the key; the token cache hashes tokens with a per-process secret before they get
here, so a key never holds a credential.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Clock = Callable[[], float]


class ExpiringCache(Generic[K, V]):
    def __init__(self, max_entries: int, *, clock: Clock = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._clock = clock
        self._entries: collections.OrderedDict[K, tuple[float, V]] = collections.OrderedDict()
        self._inflight: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def set(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            self._entries.pop(key, None)
            return
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    async def get_or_compute(
        self,
        key: K,
        compute: Callable[[], Awaitable[V]],
        ttl_of: Callable[[V], float],
    ) -> V:
        """The cached value, or ``compute()`` once for all concurrent callers of ``key``.

        ``ttl_of(value)`` says how long to keep it (0: do not cache, e.g. an error answer). The
        computation runs in its own task, so one caller going away (a client disconnecting) does
        not cancel it for the others; an exception reaches every waiter and caches nothing.
        """
        cached = self.get(key)
        if cached is not None:
            return cached
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(compute())
            self._inflight[key] = task

            def finished(done: asyncio.Future[V]) -> None:
                self._inflight.pop(key, None)
                if not done.cancelled() and done.exception() is None:
                    value = done.result()
                    self.set(key, value, ttl_of(value))

            task.add_done_callback(finished)
        return await asyncio.shield(task)
