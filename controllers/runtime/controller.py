"""A controller: ``concurrency`` reconcilers draining a queue of keys into a reconcile function.

A reconcile returns a ``Result``: done (the key's backoff is forgotten), ``requeue_after`` seconds
(a scheduled re-check, for example the next revalidation), or ``retry`` (backoff). An exception is
logged and retried with backoff; one key is never reconciled by two reconcilers at once.
``manager.Manager`` runs controllers while this replica leads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Generic, TypeVar

from controllers.runtime import queue
from timing import backoff as backoffs
from timing import clock as clocks

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    requeue_after: float | None = None
    retry: bool = False


DONE = Result()


class Controller(Generic[K]):
    """Reconcilers over a queue of keys. ``keys`` lists every key to check when a run starts (all
    of them: a replica that just became leader trusts nothing it did not look at)."""

    def __init__(
        self,
        name: str,
        reconcile: Callable[[K], Awaitable[Result]],
        clock: clocks.Clock,
        *,
        keys: Callable[[], Iterable[K]] = tuple,
        concurrency: int = 4,
        backoff: backoffs.Backoff = queue.DEFAULT_BACKOFF,
    ) -> None:
        self.name = name
        self._reconcile = reconcile
        self._clock = clock
        self._keys = keys
        self._backoff = backoff
        self.queue: queue.WorkQueue[K] = queue.WorkQueue(clock, backoff)
        self.queue.shutdown()  # nothing is queued until run() starts
        self._concurrency = concurrency
        self.reconciled = 0

    @property
    def running(self) -> bool:
        return not self.queue.closed

    def enqueue(self, key: K) -> None:
        """Queue ``key`` (dropped while the controller is not running: a run starts with every
        key anyway)."""
        self.queue.add(key)

    async def process_one(self, key: K) -> None:
        """Reconcile ``key`` once and schedule what its result asks for (tests call this)."""
        try:
            result = await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception:
            delay = self.queue.add_rate_limited(key)
            log.exception("%s: reconciling %s failed; retrying in %.0fs", self.name, key, delay)
            return
        finally:
            self.reconciled += 1
        if result.retry:
            self.queue.add_rate_limited(key)
            return
        self.queue.forget(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)

    async def _reconciler(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                await self.process_one(key)
            finally:
                self.queue.done(key)

    def open(self) -> None:
        """A fresh queue holding every key; ``run`` calls it (tests drive ``process_one``)."""
        self.queue = queue.WorkQueue(self._clock, self._backoff)
        for key in self._keys():
            self.queue.add(key)

    async def run(self) -> None:
        """Run the reconcilers until the queue shuts down (``stop``) or the task is cancelled."""
        self.open()
        reconcilers = [asyncio.create_task(self._reconciler(), name=f"{self.name} reconciler {i}")
                       for i in range(self._concurrency)]
        try:
            await asyncio.gather(*reconcilers)
        finally:
            for task in reconcilers:
                task.cancel()
            await asyncio.gather(*reconcilers, return_exceptions=True)

    def stop(self) -> None:
        self.queue.shutdown()


class Runs(Generic[K]):
    """A ``manager.Runnable`` whose work is one ``Controller`` (``self.controller``): running
    and stopping it is running and stopping that controller."""

    controller: Controller[K]

    async def run(self) -> None:
        await self.controller.run()

    def stop(self) -> None:
        self.controller.stop()
