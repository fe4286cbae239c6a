"""The etcd storage backend: ``interface.Store`` over etcd v3, several API replicas on one etcd.

Revisions are etcd's: a record's ``revision`` is its key's ``mod_revision`` (the resourceVersion),
a store revision is a response header's revision. Keys live under the configured prefix
(``/gpustack`` + ``/modelartifacts/<ns>/<name>``). Every write is one Txn comparing the key's
create or mod revision, so compare-and-swap and create-only-if-absent hold across replicas with
no lock of ours. Lists read at one revision in chunks (a continued page reads at the first page's
revision); watches are one gRPC Watch stream each, resumed from the last revision seen when the
stream breaks (etcd down, a hung member), ending with ``Compacted`` only when etcd no longer has
that history. A periodic compactor (kube-apiserver's scheme) shares the work among replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import grpc
import grpc.aio

from apiserver.storage import interface
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import compactor, keys
from apiserver.storage.etcd.gen import rpc_pb2
from timing import backoff as backoffs

_log = logging.getLogger(__name__)

CHUNK = 2000
"""Keys read per Range when a list asks for everything (bounds one response's size)."""
START_TIMEOUT = 30.0
"""How long start() waits for etcd to answer before giving up."""
MIN_VERSION = (3, 4)
FENCE_LIMIT = 100_000
"""The most writes ``fence`` makes to raise etcd's revision (etcd moves it one per write; about
6,000 a second here); a store further behind is refused, see ``fence``."""
FENCE_CONCURRENCY = 64
_RETRY = backoffs.Backoff(0.1, 2.0)
"""Backoff between attempts to re-open a broken watch stream (and to reach etcd at start)."""

_PUT = rpc_pb2.Event.EventType.PUT
_CMP = rpc_pb2.Compare


class Closed(interface.StorageError):
    """The store was used before start() or after close()."""


Progress = interface.Progress
Update = interface.Event | interface.Progress


class Store(interface.Store):
    """``interface.Store`` on etcd. ``compaction_interval`` 0 disables the compactor;
    ``fence_limit``: the most empty writes ``fence`` makes (``FENCE_LIMIT``)."""

    health_check = "etcd"

    def __init__(
        self,
        config: etcd_client.Config,
        *,
        compaction_interval: float = 300.0,
        start_timeout: float = START_TIMEOUT,
        fence_limit: int = FENCE_LIMIT,
    ) -> None:
        self.config = config
        self.keys = keys.Keys(config.prefix)
        self.client = etcd_client.Client(config)
        """The etcd client this store talks through (leases and leader election can share it)."""
        self._compaction_interval = compaction_interval
        self._start_timeout = start_timeout
        self._fence_limit = fence_limit
        self._compactor: asyncio.Task[None] | None = None
        self._calls: set[grpc.aio.StreamStreamCall[rpc_pb2.WatchRequest,
                                                   rpc_pb2.WatchResponse]] = set()  # fmt: skip
        self._open = False
        self.version = ""

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._open:
            raise Closed("store already started")
        self.client.open()
        try:
            status = await self._first_status()
        except BaseException:
            await self.client.close()
            raise
        self.version = status.version
        self._open = True
        _log.info("etcd %s at %s, keys under %s", status.version,
                  ",".join(self.config.endpoints), self.keys.root)  # fmt: skip
        if self._compaction_interval > 0:
            self._compactor = asyncio.create_task(
                compactor.run(self.client, self.keys.compaction, self._compaction_interval)
            )

    async def _first_status(self) -> rpc_pb2.StatusResponse:
        deadline = time.monotonic() + self._start_timeout
        failures = 0
        while True:
            try:
                status = await self.client.status(timeout=self.config.health_timeout)
                break
            except (etcd_client.Unavailable, etcd_client.DeadlineExceeded) as exc:
                failures += 1
                delay = _RETRY.delay(failures)
                if time.monotonic() + delay > deadline:
                    endpoints = ",".join(self.config.endpoints)
                    raise interface.StorageError(
                        f"etcd at {endpoints} did not answer in {self._start_timeout:g}s: {exc}"
                    ) from exc
                await asyncio.sleep(delay)
        if _version(status.version) < MIN_VERSION:
            raise interface.StorageError(
                f"etcd {status.version} is too old: this server needs 3.4 or newer"
            )
        return status

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        if self._compactor is not None:
            self._compactor.cancel()
            await asyncio.gather(self._compactor, return_exceptions=True)
        for call in list(self._calls):
            call.cancel()
        await self.client.close()

    async def check(self) -> None:
        self._check_open()
        await self.client.probe(self.keys.health)

    # -- reads -------------------------------------------------------------------------------

    async def current_revision(self) -> int:
        self._check_open()
        response = await self.client.range(
            rpc_pb2.RangeRequest(key=self.keys.health, count_only=True)
        )
        return int(response.header.revision)

    async def oldest_revision(self) -> int:
        """etcd's compaction revision (0: nothing compacted). etcd does not report it directly:
        a read at revision 1 succeeds when nothing was compacted, otherwise a watch from revision
        1 is cancelled with the compaction revision."""
        self._check_open()
        try:
            await self.client.range(
                rpc_pb2.RangeRequest(key=self.keys.health, count_only=True, revision=1)
            )
            return 0
        except interface.Compacted:
            pass
        call = self.client.watch_call()
        try:
            create = rpc_pb2.WatchCreateRequest(key=self.keys.health, start_revision=1)
            await call.write(rpc_pb2.WatchRequest(create_request=create))
            async with asyncio.timeout(self.config.request_timeout):
                while True:
                    response = await call.read()
                    if not isinstance(response, rpc_pb2.WatchResponse):
                        raise etcd_client.Unavailable("etcd closed the watch stream")
                    if response.canceled:
                        return int(response.compact_revision)
        except grpc.aio.AioRpcError as exc:
            raise etcd_client.translate(exc) from None
        except TimeoutError:
            raise etcd_client.DeadlineExceeded("etcd did not answer in time") from None
        finally:
            call.cancel()

    async def get(self, key: str) -> interface.Record | None:
        self._check_open()
        response = await self.client.range(rpc_pb2.RangeRequest(key=self.keys.full(key)))
        if not response.kvs:
            return None
        return self._record(response.kvs[0])

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str = "",
        limit: int = 0,
    ) -> interface.Page:
        self._check_open()
        if revision < 0 or limit < 0:
            raise ValueError("revision and limit must not be negative")
        low, end = self.keys.range(prefix, start_after)
        records: list[interface.Record] = []
        read_at = revision
        while True:
            want = limit - len(records) if limit else CHUNK
            request = rpc_pb2.RangeRequest(key=low, range_end=end, revision=read_at, limit=want)
            response = await self._range_at(request, revision)
            if read_at == 0:
                read_at = int(response.header.revision)
            records.extend(self._record(kv) for kv in response.kvs)
            if not response.more or not response.kvs:
                remaining = int(response.count) - len(response.kvs) if response.more else 0
                return interface.Page(records, read_at, bool(response.more), remaining)
            if limit and len(records) >= limit:
                remaining = int(response.count) - len(response.kvs)
                return interface.Page(records, read_at, True, remaining)
            low = response.kvs[-1].key + b"\0"

    async def _range_at(self, request: rpc_pb2.RangeRequest,
                        revision: int) -> rpc_pb2.RangeResponse:
        try:
            return await self.client.range(request)
        except interface.Compacted:
            raise interface.Compacted(revision, await self.oldest_revision()) from None
        except interface.FutureRevision:
            raise interface.FutureRevision(revision, await self.current_revision()) from None

    # -- writes ------------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> interface.Record:
        self._check_open()
        full = self.keys.full(key)
        absent = _CMP(result=_CMP.EQUAL, target=_CMP.CREATE, key=full, create_revision=0)
        put = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=full, value=value))
        response = await self.client.txn(rpc_pb2.TxnRequest(compare=[absent], success=[put]))
        if not response.succeeded:
            raise interface.KeyExists(key)
        revision = int(response.header.revision)
        return interface.Record(key, value, revision, revision)

    async def update(self, key: str, value: bytes, *, expected_revision: int) -> interface.Record:
        self._check_open()
        full = self.keys.full(key)
        put = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=full, value=value,
                                                               prev_kv=True))  # fmt: skip
        response = await self._swap(key, full, expected_revision, put)
        previous = response.responses[0].response_put.prev_kv
        return interface.Record(key, value, int(response.header.revision),
                                int(previous.create_revision))  # fmt: skip

    async def delete(self, key: str, *, expected_revision: int) -> interface.Record:
        self._check_open()
        full = self.keys.full(key)
        remove = rpc_pb2.RequestOp(
            request_delete_range=rpc_pb2.DeleteRangeRequest(key=full, prev_kv=True)
        )
        response = await self._swap(key, full, expected_revision, remove)
        previous = response.responses[0].response_delete_range.prev_kvs[0]
        return interface.Record(key, previous.value, int(response.header.revision),
                                int(previous.create_revision))  # fmt: skip

    async def _swap(self, key: str, full: bytes, expected: int,
                    op: rpc_pb2.RequestOp) -> rpc_pb2.TxnResponse:
        """One Txn: ``op`` if the key exists at ``expected``, else read it to say why not."""
        same = _CMP(result=_CMP.EQUAL, target=_CMP.MOD, key=full, mod_revision=expected)
        live = _CMP(result=_CMP.GREATER, target=_CMP.VERSION, key=full, version=0)
        read = rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=full))
        response = await self.client.txn(
            rpc_pb2.TxnRequest(compare=[same, live], success=[op], failure=[read])
        )
        if not response.succeeded:
            found = response.responses[0].response_range.kvs
            if not found:
                raise interface.KeyNotFound(key)
            raise interface.RevisionConflict(key, expected, int(found[0].mod_revision))
        return response

    async def compact(self, revision: int) -> None:
        self._check_open()
        current = await self.current_revision()
        if revision > current:
            raise interface.FutureRevision(revision, current)
        with contextlib.suppress(interface.Compacted):  # already compacted that far
            await self.client.compact(revision)

    async def fence(self, revision: int) -> int:
        """See ``interface.Store.fence``. etcd hands out revisions itself, one per write, so it
        is raised with empty writes of a key of the server's own (outside every list and watch),
        then compacted there. Further behind than ``FENCE_LIMIT`` writes (a new, empty etcd
        under a mark of millions) this refuses: restore etcd with ``etcdutl snapshot restore
        --bump-revision`` (above the mark) ``--mark-compacted`` instead, as kube-apiserver's own
        etcd needs after a restore."""
        self._check_open()
        current = await self.current_revision()
        if revision - current > self._fence_limit:
            raise interface.StorageError(
                f"etcd is at revision {current}, {revision - current} behind {revision}: more "
                f"than {self._fence_limit} writes to catch up; restore etcd with `etcdutl "
                f"snapshot restore --bump-revision {revision - current} --mark-compacted`")
        put = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=self.keys.fence, value=b""))
        reached = current

        async def one() -> None:
            nonlocal reached
            response = await self.client.txn(rpc_pb2.TxnRequest(success=[put]))
            reached = max(reached, int(response.header.revision))

        while reached < revision:
            batch = min(FENCE_CONCURRENCY, revision - reached)
            await asyncio.gather(*(one() for _ in range(batch)))
        with contextlib.suppress(interface.Compacted):  # already compacted that far
            await self.client.compact(reached)
        return reached

    # -- watch -------------------------------------------------------------------------------

    async def watch(self, prefix: str, *, after: int) -> AsyncIterator[interface.Event]:
        async for update in self.updates(prefix, after=after):
            if isinstance(update, interface.Event):
                yield update

    async def updates(self, prefix: str, *, after: int) -> AsyncIterator[Update]:
        """``watch`` plus etcd's progress notifications as ``Progress``.

        etcd 3.4 sends periodic notifications to synced watchers only, on the same stream as the
        events, so a ``Progress(R)`` is a promise that no event of the range at or below R is
        still to come. (Requested notifications are not used: on 3.4 before 3.4.24 they could
        overtake events, etcd issue 15220.)
        """
        self._check_open()
        if after < 0:
            raise ValueError("after must not be negative")
        low, end = self.keys.range(prefix, "")
        cursor = after
        failures = 0
        while self._open:
            call = self.client.watch_call()
            self._calls.add(call)
            try:
                create = rpc_pb2.WatchCreateRequest(
                    key=low, range_end=end, start_revision=cursor + 1, prev_kv=True,
                    progress_notify=True,
                )  # fmt: skip
                await call.write(rpc_pb2.WatchRequest(create_request=create))
                while True:
                    response = await call.read()
                    if not isinstance(response, rpc_pb2.WatchResponse):
                        break  # the stream ended: open it again from the cursor
                    if response.canceled:
                        if response.compact_revision:
                            raise interface.Compacted(cursor, int(response.compact_revision))
                        raise interface.StorageError(
                            f"etcd cancelled the watch: {response.cancel_reason[:200]}")
                    if response.created:
                        failures = 0
                        continue
                    if not response.events:
                        revision = int(response.header.revision)
                        if revision > cursor:
                            cursor = revision
                            yield Progress(revision)
                        continue
                    for event in response.events:
                        revision = int(event.kv.mod_revision)
                        if revision <= cursor:
                            # etcd broke its ordering promise (an event at or below a progress
                            # mark, as etcd releases without the fix of etcd issue 20221 could
                            # for a watch started ahead of the store): never deliver it out of
                            # order; the watcher starts over from a fresh list instead
                            _log.error("etcd sent revision %d after promising %d; ending the "
                                       "watch so its client relists", revision, cursor)
                            raise interface.Compacted(cursor, cursor + 1)
                        yield self._event(event, cursor)
                        cursor = revision
            except grpc.aio.AioRpcError as exc:
                failure = etcd_client.translate(exc)
                if not isinstance(failure, etcd_client.Unavailable):
                    raise failure from None
                self.client.watch_failed()
                _log.debug("watch stream broke (%s); resuming after %d", failure, cursor)
            except asyncio.CancelledError:
                if self._open:
                    raise
                return  # close() cancelled the stream
            finally:
                self._calls.discard(call)
                call.cancel()
            if self._open:
                failures += 1
                await asyncio.sleep(_RETRY.delay(failures))

    # -- conversions -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._open:
            raise Closed("store is not open")

    def _record(self, kv: rpc_pb2.KeyValue) -> interface.Record:
        return interface.Record(self.keys.short(kv.key), kv.value, int(kv.mod_revision),
                                int(kv.create_revision))  # fmt: skip

    def _event(self, event: rpc_pb2.Event, cursor: int) -> interface.Event:
        kv = event.kv
        previous = self._record(event.prev_kv) if event.HasField("prev_kv") else None
        if event.type == _PUT:
            if previous is None and kv.version > 1:
                # etcd keeps the previous value of every event it can still replay
                raise interface.Compacted(cursor, int(kv.mod_revision))
            return interface.Event(interface.EventType.PUT, self._record(kv), previous)
        if previous is None:
            raise interface.Compacted(cursor, int(kv.mod_revision))
        record = interface.Record(previous.key, previous.value, int(kv.mod_revision),
                                  previous.create_revision)  # fmt: skip
        return interface.Event(interface.EventType.DELETE, record, previous)


def _version(text: str) -> tuple[int, int]:
    try:
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)
