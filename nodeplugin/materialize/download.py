"""The hub downloader: ``HubMaterializer`` implements ``interface.Materializer`` for hub sources.

One attempt per digest for the whole node; concurrent ``ensure`` calls join it. A failed attempt
leaves a failure record that answers further calls until its ``retry_time`` (``failures``); an
attempt no mount asked about for ``idle_cancel_seconds`` is canceled and its partial files stay
for the next attempt to resume. Requests, bandwidth, look-ahead memory and disk space are shared
node-wide through ``attempt.Node``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import logging
import time
from collections.abc import Mapping

import httpx
from httpcore._async import http11 as httpcore_http11

from hub import blocking, huggingface, modelscope, source
from hub import config as hub_config
from nodeplugin.cache import files, layout, origins
from nodeplugin.materialize import (
    attempt,
    capacity,
    interface,
    limits,
    peers,
    ranges,
    receive,
    transfer,
)
from nodeplugin.materialize import failures as failure_records
from openapi import grammar, nodestore, sources

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20
MAX_CONCURRENCY = nodestore.CONCURRENCY.maximum
"""The largest ``download.concurrency`` (the spec's bound, and so the flag's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    concurrency: int = nodestore.CONCURRENCY.default
    """``download.concurrency``: open hub requests on the node."""
    bytes_per_second: int = nodestore.BYTES_PER_SECOND.default
    """``download.bytesPerSecond``; 0 is unlimited."""
    high_percent: int = nodestore.HIGH_PERCENT.default
    memory_bytes: int = 12 << 20
    """Bytes received and not yet hashed, node-wide (``limits.Budget``): more lets more ranges
    of a file run at once (12 MiB: three 4 MiB parts beside each file's frontier), and is what a
    crash loses beside the bytes since each file's checkpoint; 12 MiB keeps that under 1% of a
    2.5 GiB model (the resume benchmark)."""
    idle_cancel_seconds: float = 300.0
    follow_fetching: bool = True
    """Under node-to-node sync, a file another node is fetching is taken from it as it arrives
    (``swarm``'s ``follow``), not waited for until it is stored."""
    tuning: transfer.Tuning = dataclasses.field(default_factory=transfer.Tuning)
    policy: ranges.Policy = dataclasses.field(default_factory=ranges.Policy)


class HubMaterializer:
    """Downloads, verifies and publishes hub content into one cache."""

    def __init__(
        self,
        cache: layout.Layout,
        sources: Mapping[interface.SourceKind, source.Source],
        settings: Settings = Settings(),
        *,
        client: httpx.AsyncClient | None = None,
        connections: blocking.Connections | None = None,
        space: capacity.Capacity | None = None,
        failures: failure_records.Failures | None = None,
        holders: peers.Peers | None = None,
        origin_records: origins.Origins | None = None,
        store: files.FileStore | None = None,
    ) -> None:
        """``space`` and ``failures`` are the plugin's own ledger and failure records when it
        shares them with collection and the status report; by default they are private.
        ``holders`` turns node-to-node sync on: every attempt asks them first (``peers``).
        ``store``: the node's file store, by default the cache root's one (``files.of``; tests
        pass one that stops at a crash point)."""
        self._cache = cache
        self._sources = dict(sources)
        self._client = client
        self._connections = connections
        self._retired: list[tuple[httpx.AsyncClient, blocking.Connections | None]] = []
        self.hub_config: hub_config.HubConfig | None = None
        """What the hub clients were built from (``from_config``, ``reconfigure``)."""
        self.settings = settings
        # Threads are made as requests need them, up to the largest concurrency the node allows.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            MAX_CONCURRENCY, thread_name_prefix="hub-receive"
        )
        cache.create()
        self.node = attempt.Node(
            cache=cache,
            requests=limits.RequestLimiter(settings.concurrency),
            rate=limits.RateLimiter(settings.bytes_per_second),
            budget=limits.Budget(settings.memory_bytes),
            capacity=space or capacity.Capacity(cache.root, high_percent=settings.high_percent),
            tuning=settings.tuning,
            policy=settings.policy,
            workers=settings.concurrency,
            executor=self._executor,
            buffers=receive.BufferPool(),
            store=store or files.of(cache),
            follow=settings.follow_fetching,
        )
        self.backoff = failures or failure_records.Failures(cache)
        self._attempts: dict[str, attempt.Attempt] = {}
        self.holders = holders
        self.origins = origin_records or origins.Origins(cache)
        """Where each tree this materializer published came from (the status' ``source``)."""
        self.downloaded_bytes = 0
        """Bytes received from a hub (a peer's are counted by ``holders``)."""
        self._done = interface.DoneCallbacks()

    @classmethod
    def from_config(
        cls,
        cache: layout.Layout,
        config: hub_config.HubConfig,
        settings: Settings = Settings(),
        *,
        space: capacity.Capacity | None = None,
        failures: failure_records.Failures | None = None,
        holders: peers.Peers | None = None,
        origin_records: origins.Origins | None = None,
        store: files.FileStore | None = None,
    ) -> HubMaterializer:
        """A materializer with its own hub client built from the node's hub settings."""
        client, connections, sources = _hub_sources(config)
        built = cls(cache, sources, settings, client=client, connections=connections,
                    space=space, failures=failures, holders=holders,
                    origin_records=origin_records, store=store)
        built.hub_config = config
        return built

    async def reconfigure(
        self, config: hub_config.HubConfig, *, concurrency: int, bytes_per_second: int
    ) -> None:
        """Apply the node's spec: the limits at once (running downloads included); a new hub
        client for attempts that start from now on, while running ones finish on theirs (it is
        closed when no attempt runs any more). Raises ``HubError`` for an unusable config,
        changing nothing."""
        if config != self.hub_config:
            client, connections, sources = _hub_sources(config)
            if self._client is not None:
                self._retired.append((self._client, self._connections))
            self._client, self._connections = client, connections
            self._sources, self.hub_config = sources, config
        await self.node.requests.set_limit(concurrency)
        self.node.rate.set_rate(bytes_per_second)
        # New attempts run as many range workers as requests may be open; running ones keep
        # theirs and share the resized limiter.
        self.node = dataclasses.replace(self.node, workers=concurrency)
        self.settings = dataclasses.replace(
            self.settings, concurrency=concurrency, bytes_per_second=bytes_per_second
        )
        await self._close_retired()

    async def _close_retired(self) -> None:
        if self._attempts or not self._retired:
            return
        retired, self._retired = self._retired, []
        for old_client, old_connections in retired:
            if old_connections is not None:
                old_connections.close()
            await old_client.aclose()

    async def ensure(self, request: interface.Request) -> interface.Progress:
        digest = request.digest
        if not grammar.is_digest(digest):
            return _failed(digest, interface.Reason.INVALID_REQUEST, "not a sha256 digest", None)
        if await asyncio.to_thread(self._cache.is_published, digest):
            return interface.Progress(digest, interface.State.PUBLISHED)
        running = self._attempts.get(digest)
        if running is not None:
            running.touch(request.token)
            return running.progress()
        answer = self.backoff.answer(digest)
        if answer is not None:
            return _failed(digest, answer.reason, answer.message, answer.retry_time)
        client = self._sources.get(request.source.kind)
        if client is None:
            return _failed(digest, interface.Reason.INVALID_REQUEST,
                           f"no client for source kind {request.source.kind!r}", None)
        new = attempt.Attempt(
            request, client, self.node, self._count, holders=self.holders,
            on_peer_bytes=self.holders.delivered if self.holders is not None else lambda n: None,
        )
        self._attempts[digest] = new
        new.task = asyncio.create_task(self._run(new), name=f"materialize {digest}")
        return new.progress()

    def running(self) -> list[interface.Progress]:
        return [a.progress() for a in self._attempts.values()]

    async def close(self) -> None:
        """Stop every attempt (its partial files stay) and close the hub connections."""
        tasks = [a.task for a in self._attempts.values() if a.task is not None]
        if self._connections is not None:
            # Requests waiting in threads fail at once instead of at their read timeout.
            self._connections.abort()
        for task in tasks:
            task.cancel()
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            # Even when the caller is cancelled meanwhile: every socket goes with the client.
            for old_client, old_connections in self._retired:
                if old_connections is not None:
                    old_connections.close()
                await old_client.aclose()
            if self._connections is not None:
                self._connections.close()
            self._executor.shutdown(wait=False)
            if self._client is not None:
                await self._client.aclose()

    def add_done_callback(self, callback: interface.DoneCallback) -> None:
        self._done.add(callback)

    def _count(self, size: int) -> None:
        self.downloaded_bytes += size

    async def _run(self, job: attempt.Attempt) -> None:
        digest = job.digest
        watchdog = asyncio.create_task(self._watch(job))
        began = time.monotonic()
        result = interface.State.PUBLISHED.value
        check: interface.Check | None = None
        try:
            await job.run()
            await asyncio.to_thread(self.origins.record, digest, job.origin)
            await asyncio.to_thread(self.backoff.clear, digest)
            log.info("published %s", digest)
        except attempt.Failed as failed:
            result, check = failed.reason.value, failed.check
            record = await asyncio.to_thread(
                self.backoff.record, digest, failed.reason, failed.message
            )
            log.warning("materializing %s failed: %s: %s (retry after %s)",
                        digest, failed.reason.value, failed.detail, record.retry_time)
        except asyncio.CancelledError:
            if not job.idle_canceled:
                result = interface.STOPPED
                raise
            result = interface.Reason.CANCELED.value
            message = "no mount asked for the digest for five minutes"
            await asyncio.to_thread(
                self.backoff.record, digest, interface.Reason.CANCELED, message
            )
            log.info("materializing %s canceled: %s; partial files kept", digest, message)
        except Exception:
            # A bug, not a hub or disk failure: keep the plugin serving and say so.
            result = interface.Reason.SOURCE_UNAVAILABLE.value
            log.exception("materializing %s failed unexpectedly", digest)
            await asyncio.to_thread(self.backoff.record, digest,
                                    interface.Reason.SOURCE_UNAVAILABLE, "internal error")
        finally:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog
            self._attempts.pop(digest, None)
            self._done.notify(interface.Completion(digest, result, time.monotonic() - began,
                                                   check, job.origin))
            if self._retired and not self._attempts:
                await self._close_retired()

    async def _watch(self, job: attempt.Attempt) -> None:
        idle = self.settings.idle_cancel_seconds
        while True:
            await asyncio.sleep(min(5.0, idle / 4))
            if time.monotonic() - job.last_asked >= idle and job.task is not None:
                job.idle_canceled = True
                job.task.cancel()
                return


def _hub_sources(
    config: hub_config.HubConfig,
) -> tuple[httpx.AsyncClient, blocking.Connections, dict[interface.SourceKind, source.Source]]:
    """The async client, the worker threads' connections and the sources over both."""
    hub_config.check(config)
    _read_in_large_pieces()
    client = hub_config.make_client(config)
    connections = blocking.Connections(config)
    return client, connections, {
        sources.HUGGING_FACE: huggingface.HuggingFace(
            client, config.huggingface_endpoint, connections=connections
        ),
        sources.MODEL_SCOPE: modelscope.ModelScope(
            client, config.modelscope_endpoint, connections=connections
        ),
    }


def _read_in_large_pieces() -> None:
    """Let httpcore read HTTP/1.1 bodies 1 MiB at a time instead of 64 KiB.

    Every read costs a trip through httpcore, anyio and the event loop; at 64 KiB that overhead
    is the largest CPU cost of a download (measured: about a third of the time on a 2-core node).
    httpcore has no setting for it, so this sets the class attribute its connections read.
    """
    connection = getattr(httpcore_http11, "AsyncHTTP11Connection", None)
    if connection is not None and getattr(connection, "READ_NUM_BYTES", 0) < READ_BYTES:
        connection.READ_NUM_BYTES = READ_BYTES


def _failed(
    digest: str,
    reason: interface.Reason,
    message: str,
    retry_time: datetime.datetime | None,
) -> interface.Progress:
    return interface.Progress(digest, interface.State.FAILED, reason=reason, message=message,
                              retry_time=retry_time)
