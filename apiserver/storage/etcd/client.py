"""A small asyncio client for etcd's v3 gRPC API (grpc.aio over stubs generated from rpc.proto).

One channel per endpoint; calls go to the current endpoint and move to the next one when it is
unreachable. Reads are retried once on the next endpoint; writes never are (a write whose answer
was lost may have been applied, so it is reported as failed-or-unknown, never retried blindly).
Every unary call has a deadline, so a hung etcd (SIGSTOP, a partition) costs a request its
timeout and never more. gRPC failures become ``interface`` errors here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
import grpc.aio

from apiserver.storage import interface
from apiserver.storage.etcd.gen import rpc_pb2, rpc_pb2_grpc

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

DEFAULT_PREFIX = "/gpustack"
MAX_MESSAGE = 256 * 1024 * 1024
"""Largest response accepted (gRPC's default, 4 MiB, is less than one large list)."""

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_send_message_length", 4 * 1024 * 1024),
    # reconnect quickly once etcd is back (gRPC's default backoff grows to two minutes)
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # notice a dead or hung peer on idle watch streams; etcd refuses pings more often than 5 s
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


Unavailable = interface.Unavailable
DeadlineExceeded = interface.Timeout


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    endpoints: tuple[str, ...]
    """Client URLs, ``http://host:port`` or ``https://host:port``."""
    ca_file: pathlib.Path | None = None
    cert_file: pathlib.Path | None = None
    key_file: pathlib.Path | None = None
    prefix: str = DEFAULT_PREFIX
    request_timeout: float = 10.0
    """Deadline of every unary call."""
    health_timeout: float = 2.0
    """Deadline of the readiness probe."""


def parse_endpoint(url: str) -> tuple[str, bool]:
    """``(host:port, tls)`` of an endpoint URL; ValueError names what is wrong."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"etcd endpoint {url!r}: the scheme must be http or https")
    if not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"etcd endpoint {url!r}: expected scheme://host:port")
    try:
        port = parts.port or 2379
    except ValueError:
        raise ValueError(f"etcd endpoint {url!r}: the port is not a number") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", parts.scheme == "https"


class _Endpoint:
    """One channel and its stubs (built once: a stub per call would cost more than the call)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.kv = rpc_pb2_grpc.KVStub(channel)
        self.watch = rpc_pb2_grpc.WatchStub(channel)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(channel)


class Client:
    def __init__(self, config: Config) -> None:
        if not config.endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self.config = config
        self._targets = [parse_endpoint(url) for url in config.endpoints]
        self._endpoints: list[_Endpoint] = []
        self._current = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        credentials = self._credentials() if any(tls for _, tls in self._targets) else None
        for target, tls in self._targets:
            if tls:
                assert credentials is not None
                channel = grpc.aio.secure_channel(target, credentials, options=_CHANNEL_OPTIONS)
            else:
                channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
            self._endpoints.append(_Endpoint(channel))

    async def close(self) -> None:
        endpoints, self._endpoints = self._endpoints, []
        for endpoint in endpoints:
            await endpoint.channel.close(grace=None)

    def _credentials(self) -> grpc.ChannelCredentials:
        config = self.config
        return grpc.ssl_channel_credentials(
            root_certificates=config.ca_file.read_bytes() if config.ca_file else None,
            private_key=config.key_file.read_bytes() if config.key_file else None,
            certificate_chain=config.cert_file.read_bytes() if config.cert_file else None,
        )

    # -- calls -------------------------------------------------------------------------------

    def _endpoint(self) -> _Endpoint:
        if not self._endpoints:
            raise Unavailable("the etcd client is closed")
        return self._endpoints[self._current % len(self._endpoints)]

    def _failed_over(self, endpoint: _Endpoint) -> None:
        """The endpoint is unreachable: the next call tries the next endpoint."""
        if len(self._endpoints) > 1 and self._endpoint() is endpoint:
            self._current = (self._current + 1) % len(self._endpoints)
            target = self._targets[self._current][0]
            _log.warning("etcd endpoint unreachable; trying %s next", target)

    async def _call(
        self,
        make: Callable[[_Endpoint], Callable[..., Awaitable[_T]]],
        request: object,
        *,
        idempotent: bool,
        timeout: float | None = None,
    ) -> _T:
        attempts = len(self._endpoints) if idempotent else 1
        for attempt in range(max(1, attempts)):
            endpoint = self._endpoint()
            try:
                return await make(endpoint)(request, timeout=timeout or self.config.request_timeout)
            except grpc.aio.AioRpcError as exc:
                failure = translate(exc)
                if isinstance(failure, Unavailable):
                    self._failed_over(endpoint)
                    if attempt + 1 < attempts:
                        continue
                raise failure from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def range(self, request: rpc_pb2.RangeRequest) -> rpc_pb2.RangeResponse:
        return await self._call(lambda e: e.kv.Range, request,
                                idempotent=True)  # fmt: skip

    async def txn(self, request: rpc_pb2.TxnRequest) -> rpc_pb2.TxnResponse:
        return await self._call(lambda e: e.kv.Txn, request,
                                idempotent=False)  # fmt: skip

    async def compact(self, revision: int) -> rpc_pb2.CompactionResponse:
        return await self._call(lambda e: e.kv.Compact,
                                rpc_pb2.CompactionRequest(revision=revision),
                                idempotent=True)  # fmt: skip

    async def probe(self, key: bytes) -> int:
        """A linearizable read of ``key`` under the health deadline: proves etcd has a leader and
        serves; returns the store revision."""
        response = await self._call(lambda e: e.kv.Range,
                                    rpc_pb2.RangeRequest(key=key, count_only=True),
                                    idempotent=True, timeout=self.config.health_timeout)
        return int(response.header.revision)

    async def status(self, *, timeout: float | None = None) -> rpc_pb2.StatusResponse:
        return await self._call(lambda e: e.maintenance.Status,
                                rpc_pb2.StatusRequest(), idempotent=True,
                                timeout=timeout)  # fmt: skip

    def watch_call(self) -> grpc.aio.StreamStreamCall[rpc_pb2.WatchRequest, rpc_pb2.WatchResponse]:
        """A new Watch stream (no deadline: it lives as long as its watcher)."""
        call: grpc.aio.StreamStreamCall[rpc_pb2.WatchRequest, rpc_pb2.WatchResponse] = (
            self._endpoint().watch.Watch()
        )
        return call

    def watch_failed(self) -> None:
        """A watch stream could not reach its endpoint: fail over like a unary call."""
        if self._endpoints:
            self._failed_over(self._endpoint())


def translate(exc: grpc.aio.AioRpcError) -> interface.StorageError:
    """One gRPC failure as a storage error. etcd's messages name no key or value, so they are
    safe to keep (they reach logs, never clients)."""
    code = exc.code()
    details = exc.details() or ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded("etcd did not answer in time")
    if code == grpc.StatusCode.UNAVAILABLE:
        return Unavailable(f"etcd is unavailable: {details[:200]}")
    if code == grpc.StatusCode.OUT_OF_RANGE and "compacted" in details:
        return interface.Compacted(0, 0)  # the caller fills in the revisions
    if code == grpc.StatusCode.OUT_OF_RANGE and "future" in details:
        return interface.FutureRevision(0, 0)
    if code == grpc.StatusCode.CANCELLED:
        return Unavailable("the etcd call was cancelled")
    return interface.StorageError(f"etcd failed: {code.name}: {details[:200]}")
