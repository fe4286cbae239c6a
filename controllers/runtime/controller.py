"""Running controllers: workers draining a queue into a reconcile function, and a ``Manager``
that starts informers, waits for their first list, runs the controllers while this replica
leads, and stops everything gracefully.

A reconcile returns a ``Result``: done (the key's backoff is forgotten), ``requeue_after`` seconds
(a scheduled re-check, for example the next revalidation), or ``retry`` (backoff). An exception is
logged and retried with backoff; one key is never reconciled by two workers at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar

from controllers.runtime import informer, queue
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
    """Workers over a queue of keys. ``keys`` lists every key to check when a run starts (all
    of them: a replica that just became leader trusts nothing it did not look at)."""

    def __init__(
        self,
        name: str,
        reconcile: Callable[[K], Awaitable[Result]],
        clock: clocks.Clock,
        *,
        keys: Callable[[], Iterable[K]] = tuple,
        workers: int = 4,
        backoff: backoffs.Backoff = queue.DEFAULT_BACKOFF,
    ) -> None:
        self.name = name
        self._reconcile = reconcile
        self._clock = clock
        self._keys = keys
        self._backoff = backoff
        self.queue: queue.WorkQueue[K] = queue.WorkQueue(clock, backoff)
        self.queue.shutdown()  # nothing is queued until run() starts
        self._workers = workers
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

    async def _worker(self) -> None:
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
        """Run the workers until the queue shuts down (``stop``) or the task is cancelled."""
        self.open()
        workers = [asyncio.create_task(self._worker(), name=f"{self.name} worker {i}")
                   for i in range(self._workers)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def stop(self) -> None:
        self.queue.shutdown()


class Runnable(Protocol):
    """A controller as the manager sees it."""

    name: str

    async def run(self) -> None: ...

    def stop(self) -> None: ...


class Leadership(Protocol):
    """Leader election as the manager sees it (``leader.AlwaysLeader`` when standalone)."""

    async def acquire(self) -> None:
        """Return once this replica leads."""
        ...

    async def hold(self) -> None:
        """Keep leading; return when leadership is lost."""
        ...

    async def release(self) -> None: ...


class Manager:
    """Informers run for the whole life of the process (they are cheap reads); controllers run
    only while this replica leads, and stop when it loses the lease."""

    def __init__(
        self,
        informers: Sequence[informer.Informer],
        controllers: Sequence[Runnable],
        leadership: Leadership,
        *,
        sync_timeout: float | None = None,
        grace: float = 5.0,
        on_started: Callable[[], None] | None = None,
        shared: Sequence[informer.Informer] = (),
    ) -> None:
        """``shared``: informers someone else runs, waited for like the others."""
        self._informers = list(informers)
        self._shared = list(shared)
        self._controllers = list(controllers)
        self._leadership = leadership
        self._grace = grace
        self._sync_timeout = sync_timeout
        self._on_started = on_started
        self._tasks: list[asyncio.Task[None]] = []
        self._main: asyncio.Task[None] | None = None
        self.leading = asyncio.Event()

    def start(self) -> None:
        for inf in self._informers:
            self._tasks.append(asyncio.create_task(inf.run(),
                                                   name=f"informer {inf.resource.plural}"))
        self._main = asyncio.create_task(self._lead(), name="controller manager")

    async def synced(self) -> None:
        await asyncio.gather(*(inf.synced.wait() for inf in (*self._informers, *self._shared)))

    async def _lead(self) -> None:
        await self.synced()
        while True:
            await self._leadership.acquire()
            self.leading.set()
            log.info("leading: starting %s", ", ".join(c.name for c in self._controllers))
            if self._on_started is not None:
                self._on_started()
            running = [asyncio.create_task(c.run(), name=c.name) for c in self._controllers]
            holding = asyncio.create_task(self._leadership.hold(), name="leadership")
            try:
                await asyncio.wait([holding, *running], return_when=asyncio.FIRST_COMPLETED)
            finally:
                self.leading.clear()
                holding.cancel()
                await self._stop_controllers(running)
            log.warning("lost leadership: controllers stopped; waiting to lead again")

    async def _stop_controllers(self, running: list[asyncio.Task[None]]) -> None:
        for c in self._controllers:
            c.stop()
        _, pending = await asyncio.wait(running, timeout=self._grace) if running else ((), ())
        for task in pending:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def stop(self) -> None:
        """Graceful stop: controllers finish the key in hand (up to ``grace``), then informers
        stop and the lease is released."""
        if self._main is not None:
            self._main.cancel()
            await asyncio.gather(self._main, return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._leadership.release()
