"""The manager: informers run for the whole life of the process, controllers only while this
replica leads (``Leadership``), and everything stops gracefully."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from controllers.runtime import informer

log = logging.getLogger(__name__)


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
