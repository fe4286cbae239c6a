"""Assembling the controllers over a client, for the API server (embedded) and for
``python -m controllers`` (external).

``NodeView`` is the read side every API server runs whatever ``--controllers`` says: the
NodeModelStore informer, the digest index and the progress view. ``Worker`` is the rest: the
artifact informer, the resolver and the aggregation under a ``runtime.Manager`` (which runs them
only while this replica leads).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from controllers import config as settings
from controllers.aggregate import controller as aggregate
from controllers.nodeview import index as nodeindex
from controllers.nodeview import progress
from controllers.resolver import controller as resolver
from controllers.resolver import hubs, passes, proofs
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import events, informer
from controllers.sources import claims, secrets
from hub import config as hub_config
from hub import errors as hub_errors
from timing import clock as clocks

log = logging.getLogger(__name__)

RESYNC = 600.0


class NodeView:
    def __init__(self, api: clients.Client, clock: clocks.Clock,
                 reader: progress.LiveReader | None,
                 limits: progress.Limits = progress.DEFAULT_LIMITS) -> None:
        self.informer = informer.Informer(api, clients.NODE_MODEL_STORES, clock)
        self.index = nodeindex.DigestIndex(self.informer)
        self.progress = progress.Progress(self.index, reader, clock, limits)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.informer.run(), name="informer nodemodelstores")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class Worker:
    def __init__(
        self,
        api: clients.Client,
        config: settings.Settings,
        clock: clocks.Clock,
        *,
        index: nodeindex.DigestIndex,
        secret_source: secrets.Secrets,
        claim_source: claims.Claims,
        leadership: runtime.Leadership,
        informers: Sequence[informer.Informer] = (),
        recorder: events.Recorder | None = None,
        node_stores: runtime.Runnable | None = None,
        prefetches: runtime.Runnable | None = None,
        artifacts: informer.Informer | None = None,
        ledger: proofs.Ledger | None = None,
    ) -> None:
        """``node_stores`` and ``prefetches`` (only in the API server's process) run with the
        other controllers, while this replica leads. ``artifacts``: the artifact informer when
        the caller runs it (the API server's, which admission reads too); one of its own
        otherwise. ``ledger``: the record of the hub's verifications (the server's storage when
        embedded; in memory otherwise)."""
        self.hubs = hubs.Hubs(config.hub)
        self.recorder = recorder or events.LogRecorder()
        self.cache = hubs.ListingCache()
        shared = [artifacts] if artifacts is not None else []
        # not ``artifacts or ...``: an informer with nothing in it is falsy (it has a length)
        self.artifacts = artifacts if artifacts is not None else informer.Informer(
            api, clients.MODEL_ARTIFACTS, clock, resync=RESYNC)
        self.resolver = resolver.Resolver(
            api, self.artifacts, passes.Passes(self.hubs, self.cache), self.hubs, secret_source,
            claim_source, clock, interval=config.revalidate_interval, recorder=self.recorder,
            workers=config.resolver_workers, ledger=ledger)
        self.aggregator = aggregate.Aggregator(api, self.artifacts, index, clock)
        running: list[runtime.Runnable] = [self.resolver, self.aggregator]
        running.extend(extra for extra in (node_stores, prefetches) if extra is not None)
        own = [] if shared else [self.artifacts]
        self.manager = runtime.Manager([*own, *informers], running, leadership, shared=shared)
        self._secrets = secret_source
        self._tasks: list[asyncio.Task[None]] = []

    def reconfigure(self, hub: hub_config.HubConfig, interval: float) -> None:
        """New hub settings or interval (the settings ConfigMap changed)."""
        try:
            self.hubs.reconfigure(hub)
        except hub_errors.HubError as exc:
            log.warning("hub settings refused: %s; keeping the previous ones", exc.message)
        self.resolver.interval = interval

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._secrets.run(), name="secrets"))
        self.manager.start()

    async def stop(self) -> None:
        await self.manager.stop()
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.recorder.flush()
        await self.hubs.aclose()
