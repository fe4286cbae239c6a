"""Blocking ranged downloads for worker threads: the downloader's fast path.

The async client (``hub.config.make_client``) parses every body chunk in Python on the event
loop; for multi-GiB files that one loop becomes the bottleneck of the whole node. Here each range
is read by a worker thread over a stdlib ``http.client`` connection straight into the caller's
buffer (``readinto``: one copy from the kernel, the GIL released while it waits), so receiving,
hashing and writing run on all cores.

Everything else is the async path's: redirects go through ``fetch.Hops`` (the token policy:
``Authorization`` only while the chain never left the endpoint's origin), the final answer is
checked by ``fetch.expected_length`` and errors are mapped by the hub's own ``ErrorMapper``. Only
HTTP/1.1; HTTPS through ``https_proxy`` (CONNECT) unless ``no_proxy`` names the host, like the
async client. A proxy reached over TLS itself is not supported here: ``Connections.usable`` is
then False and the downloader keeps the async path.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import dataclasses
import http.client
import socket
import ssl
import threading
from typing import Protocol
from urllib import parse

import httpx

from hub import config as hub_config
from hub import errors, fetch
from openapi import reasons

_ERROR_BODY_LIMIT = 64 * 1024


class _Receiver(Protocol):
    def readinto(self, buffer: memoryview, /) -> int | None: ...
_Key = tuple[str, str, int]


def _key(url: httpx.URL) -> _Key:
    scheme, host, port = fetch.origin(url)
    return scheme, host, port or 0


class Connections:
    """Keep-alive connections shared by the downloader's worker threads (blocking; thread-safe).

    A connection is used by one thread at a time: taken for a request, given back once its
    response was read to the end, closed otherwise. ``close`` closes the idle ones and makes
    every connection still in use close when it is given back, so no socket outlives it.
    """

    def __init__(self, config: hub_config.HubConfig, *, user_agent: str = "model-manager-hub/1",
                 context: ssl.SSLContext | None = None) -> None:
        """``context`` replaces the TLS context ``config``'s CA bundle makes (the peers'
        client: their own CA, or none)."""
        hub_config.check(config)
        self._context = context if context is not None else hub_config.ssl_context(config)
        self._connect_timeout = config.connect_timeout
        self._read_timeout = config.read_timeout
        self._no_proxy = config.no_proxy
        self._proxy = httpx.URL(config.https_proxy) if config.https_proxy else None
        self.user_agent = user_agent
        self._lock = threading.Lock()
        self._idle: dict[_Key, list[http.client.HTTPConnection]] = {}
        self._busy: set[http.client.HTTPConnection] = set()
        self._closed = False

    @property
    def usable(self) -> bool:
        """False for a configuration this client cannot speak (a TLS connection to the proxy)."""
        return self._proxy is None or self._proxy.scheme == "http"

    def _new(self, url: httpx.URL) -> http.client.HTTPConnection:
        host, port = url.host, fetch.origin(url)[2]
        timeout = self._connect_timeout
        if url.scheme == "https":
            proxied = self._proxy is not None and not hub_config.bypasses_proxy(
                host, port, self._no_proxy
            )
            if proxied:
                assert self._proxy is not None
                proxy = self._proxy
                connection = http.client.HTTPSConnection(
                    proxy.host, fetch.origin(proxy)[2], timeout=timeout, context=self._context
                )
                headers = {}
                if proxy.userinfo:
                    user, _, password = proxy.userinfo.decode().partition(":")
                    pair = f"{parse.unquote(user)}:{parse.unquote(password)}".encode()
                    headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair).decode()
                connection.set_tunnel(host, port, headers=headers)
                return connection
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=self._context)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def take(self, url: httpx.URL, *, fresh: bool = False
             ) -> tuple[http.client.HTTPConnection, bool]:
        """A connection to ``url``'s origin and whether it was used before (it may be stale);
        with ``fresh``, a new one whatever is idle."""
        with self._lock:
            if self._closed:
                raise errors.HubError(reasons.SOURCE_UNAVAILABLE, "the hub client is closed")
            idle = None if fresh else self._idle.get(_key(url))
            connection = idle.pop() if idle else None
            reused = connection is not None
            if connection is None:
                connection = self._new(url)
            self._busy.add(connection)
        return connection, reused

    def give_back(self, url: httpx.URL, connection: http.client.HTTPConnection, reusable: bool
                  ) -> None:
        with self._lock:
            self._busy.discard(connection)
            keep = reusable and not self._closed
            if keep:
                self._idle.setdefault(_key(url), []).append(connection)
        if not keep:
            connection.close()

    def abort(self) -> None:
        """Shut down the sockets of connections in use, so threads blocked on them fail now."""
        with self._lock:
            busy = list(self._busy)
        for connection in busy:
            sock = connection.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [c for group in self._idle.values() for c in group]
            self._idle.clear()
        for connection in idle:
            connection.close()

    def request(
        self, method: str, url: httpx.URL, headers: dict[str, str], read_timeout: float | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send and read the answer's head; a kept-alive connection the server dropped in the
        meantime is replaced once, by a new connection (the other idle ones waited as long and
        may be as stale: a server's keep-alive timeout closes them all). Raises OSError or
        ``http.client.HTTPException``."""
        target = url.raw_path.decode("ascii")
        sent = {"user-agent": self.user_agent, **headers}
        for attempt in range(2):
            connection, reused = self.take(url, fresh=attempt > 0)
            try:
                connection.request(method, target, headers=sent)
                if connection.sock is not None:
                    connection.sock.settimeout(read_timeout or self._read_timeout)
                return connection, connection.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                self.give_back(url, connection, False)
                stale = isinstance(exc, (http.client.RemoteDisconnected, BrokenPipeError,
                                         ConnectionResetError))
                if not (reused and stale and attempt == 0):
                    raise
        raise AssertionError("unreachable")


class RangeBody:
    """The body of one ranged answer, read by one thread; ``abort`` may be called from another.

    ``readinto`` does at most one receive and returns what it got, so after an error the bytes
    delivered so far are exactly the bytes received: a retry can start at the next one.
    """

    def __init__(self, connections: Connections, url: httpx.URL,
                 connection: http.client.HTTPConnection, response: http.client.HTTPResponse,
                 expected: int, what: str) -> None:
        self._connections = connections
        self._url = url
        self._connection = connection
        self._response = response
        self.remaining = expected
        self.chunked_length: int | None = None
        """Set for a chunked body: its end leaves a trailer unread, so it is never reused."""
        self._what = what
        self._closed = False
        self._raw: _Receiver | None = None

    def readinto(self, buffer: memoryview) -> int:
        """Receive up to ``len(buffer)`` bytes (0 once the body is complete).

        Raises ``HubError`` (SourceUnavailable) when the connection breaks or the body ends
        early, TimeoutError when nothing arrived within the read timeout.
        """
        if self.remaining <= 0:
            return 0
        view = buffer[: self.remaining]
        try:
            if self._response.chunked:
                data = self._response.read1(len(view))
                got = len(data)
                view[:got] = data
            else:
                got = self._receive(view)
        except TimeoutError:
            raise
        except (OSError, http.client.HTTPException) as exc:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE, f"{self._what}: network error ({type(exc).__name__})"
            ) from exc
        if got == 0:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE, f"{self._what}: body ended {self.remaining} bytes early"
            )
        self.remaining -= got
        return got

    def _receive(self, view: memoryview) -> int:
        """One receive into ``view``. What the header parser read ahead is handed out first,
        from its buffer; then each call is one ``recv_into`` on the socket (the buffered
        reader's own ``readinto1`` would wait for more even with bytes in hand, and lose them
        on an error)."""
        if self._raw is not None:
            return self._raw.readinto(view) or 0
        fp = self._response.fp
        if fp is None:
            return 0
        ahead = fp.peek(1)  # what is buffered, or one receive into the buffer
        got = min(len(ahead), len(view))
        view[:got] = fp.read(got)  # from the buffer, no receive
        if got == len(ahead):
            self._raw = fp.raw  # the buffer is empty from here on
        return got

    def abort(self) -> None:
        """Unblock a thread waiting in ``readinto`` (it then fails); safe from any thread."""
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Give the connection back for reuse when the body was read to its end, else close it."""
        if self._closed:
            return
        self._closed = True
        complete = (self.remaining == 0 and self.chunked_length is None
                    and not self._response.will_close)
        self._response.close()
        self._connections.give_back(self._url, self._connection, complete)


class Landings:
    """Where a file's URL last answered after its redirects (an LFS file's signed CDN URL), so
    the next ranges of that file skip the redirect: one request per range instead of two, and
    no round trip to the hub each time. Kept per URL *and* token, so another credential is
    always checked by the hub again; with whether the token may go there (the chain never
    left the endpoint's origin). Memory only, bounded, thread-safe; the URLs are never logged.
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: collections.OrderedDict[tuple[str, str | None], tuple[str, bool]] = (
            collections.OrderedDict()
        )

    def get(self, url: str, token: str | None) -> tuple[str, bool] | None:
        with self._lock:
            found = self._items.get((url, token))
            if found is not None:
                self._items.move_to_end((url, token))
            return found

    def put(self, url: str, token: str | None, landed: str, token_allowed: bool) -> None:
        with self._lock:
            self._items[(url, token)] = (landed, token_allowed)
            self._items.move_to_end((url, token))
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def forget(self, url: str, token: str | None) -> None:
        with self._lock:
            self._items.pop((url, token), None)


def open_range(
    connections: Connections,
    url: str,
    *,
    endpoint: str,
    token: str | None,
    what: str,
    mapper: fetch.ErrorMapper,
    start: int,
    end: int,
    read_timeout: float | None = None,
    landings: Landings | None = None,
    follow: bool = True,
) -> RangeBody:
    """GET bytes ``start``..``end`` (inclusive) of a file, redirects followed under the token
    policy; returns the body to read (blocking: call in a worker thread). ``read_timeout`` is
    the longest wait for any byte (the downloader's stall timeout). With ``follow=False`` a
    redirect is an answer like any other that is not the range (``SourceUnavailable``).

    With ``landings``, a URL that redirected is asked at its last landing place next time
    (with the token only if the token could go there); a refusal there (a 4xx: the signature
    expired) forgets it and asks the hub again, once.
    """
    asked = _Asked(endpoint, what, mapper, start, end, read_timeout, follow)
    if landings is not None:
        landed = landings.get(url, token)
        if landed is not None:
            place, token_allowed = landed
            try:
                body, _ = _open(connections, place, token if token_allowed else None, asked)
                return body
            except errors.HubError as exc:
                if exc.status is None or exc.status >= 500 or exc.status == 429:
                    raise
                landings.forget(url, token)
    body, hops = _open(connections, url, token, asked)
    if landings is not None and str(hops.current) != url:
        landings.put(url, token, str(hops.current), hops.may_send_token)
    return body


@dataclasses.dataclass(frozen=True, slots=True)
class _Asked:
    """What ``open_range`` asks of every place it tries (the hub, a landing place)."""

    endpoint: str
    what: str
    mapper: fetch.ErrorMapper
    start: int
    end: int
    read_timeout: float | None
    follow: bool


def _open(connections: Connections, url: str, token: str | None,
          asked: _Asked) -> tuple[RangeBody, fetch.Hops]:
    what, mapper, start, end = asked.what, asked.mapper, asked.start, asked.end
    read_timeout = asked.read_timeout
    headers = {"accept-encoding": "identity"}
    wanted = fetch.range_header(start, end)
    if wanted is not None:
        headers["range"] = wanted
    hops = fetch.Hops(url, endpoint=asked.endpoint, token=token, what=what, follow=asked.follow)
    while True:
        current = hops.current
        try:
            connection, response = connections.request(
                hops.method, current, hops.headers(headers), read_timeout
            )
        except TimeoutError:
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: network error (timeout)"
                                  ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE, f"{what}: network error ({type(exc).__name__})"
            ) from exc
        answer = _as_httpx(response, hops.method, current)
        length = response.getheader("content-length")
        framed = not response.chunked and length is not None and length.isdigit()
        # A body whose end this reader cannot tell apart is never reused (-1: not complete).
        body = RangeBody(connections, current, connection, response,
                         int(length) if framed and length else -1, what)
        try:
            if hops.follows(response.status, response.getheader("location")):
                _drain(body)
                body.close()
                continue
            if response.status >= 400:
                raise mapper(answer, _error_body(response), what)
            expected = fetch.expected_length(answer, start, end, what)
        except BaseException:
            body.close()
            raise
        if expected is None:
            body.close()
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: answer without a length")
        if response.chunked:
            body.chunked_length = expected
        body.remaining = expected
        return body, hops


def _as_httpx(response: http.client.HTTPResponse, method: str, url: httpx.URL) -> httpx.Response:
    """The head of an answer as an ``httpx.Response``, for the checks and mappers both paths
    share (no body)."""
    return httpx.Response(
        response.status,
        headers=[(k.lower(), v) for k, v in response.getheaders()],
        request=httpx.Request(method, url),
    )


def _drain(body: RangeBody) -> None:
    """Read a short redirect body so its connection can be reused (a long one is dropped)."""
    if body.remaining > _ERROR_BODY_LIMIT or body.remaining < 0:
        body.remaining = -1  # not reusable
        return
    scratch = memoryview(bytearray(max(1, body.remaining)))
    with contextlib.suppress(errors.HubError, TimeoutError):
        while body.remaining > 0:
            body.readinto(scratch)


def _error_body(response: http.client.HTTPResponse) -> bytes:
    """The start of an error body; a broken one reads as empty (the status still decides)."""
    try:
        return response.read(_ERROR_BODY_LIMIT)
    except (OSError, http.client.HTTPException, ValueError):
        return b""


class Ranges:
    """The blocking fast path of one hub endpoint: its connections (when usable) and where its
    redirects landed. ``label`` names the hub in error messages (``huggingface.co``)."""

    def __init__(self, connections: Connections | None, endpoint: str, *, label: str,
                 mapper: fetch.ErrorMapper) -> None:
        self._connections = connections if connections is not None and connections.usable else None
        self._endpoint = endpoint
        self._label = label
        self._mapper = mapper
        self._landings = Landings()

    @property
    def available(self) -> bool:
        return self._connections is not None

    def open(self, url: str, *, repo: str, path: str, token: str | None, start: int, end: int,
             read_timeout: float | None = None) -> RangeBody:
        """``open_range`` of ``url`` (blocking: call in a worker thread)."""
        if self._connections is None:
            raise errors.HubError(reasons.INVALID_REQUEST, "no blocking client configured")
        return open_range(
            self._connections, url, endpoint=self._endpoint, token=token,
            what=f"{self._label} model {repo} file {path}", mapper=self._mapper,
            start=start, end=end, read_timeout=read_timeout, landings=self._landings,
        )
