"""One peer as a byte source (``materialize.peers.Candidate``) over HTTPS.

Every request carries this plugin's projected token for ``wire.AUDIENCE``, read from its file
each time (kubelet rotates it). The peer's answers are bound by the downloader (the manifest to
the digest, every byte to its file's hash), so its certificate need not chain to anything the
node trusts; ``verify`` may still name a CA. Failures become ``hub.errors.HubError``
(``SourceUnavailable``, ``AccessDenied`` for 401/403), so the range loop treats them as it does
a hub's.

File ranges are read as the hub's are on the downloader's fast path: by a worker thread over
``hub.blocking``'s ``http.client`` connections straight into the receive buffers
(``open_range``), never through the event loop. The async client (``Client.http``) fetches the
manifest, and ranges only for an attempt whose hub has no fast path (``stream``: the relay then
reads every source the async way).
"""

from __future__ import annotations

import dataclasses
import pathlib
import ssl
from collections.abc import AsyncIterator, Sequence

import httpx

from hub import blocking
from hub import config as hub_config
from hub import errors as hub_errors
from nodeplugin.cache import layout
from nodeplugin.peer import wire
from openapi import reasons

MAX_MANIFEST_BYTES = 16 << 20


def read_token(path: str) -> str:
    return pathlib.Path(path).read_text().strip()


@dataclasses.dataclass(frozen=True, slots=True)
class Client:
    """The connections shared by every peer of a plugin: ``http`` on the event loop (manifests),
    ``connections`` for the worker threads (file ranges)."""

    http: httpx.AsyncClient
    connections: blocking.Connections

    async def aclose(self) -> None:
        self.connections.close()
        await self.http.aclose()


class Peer:
    def __init__(self, node: str, url: str, client: Client, token_file: str) -> None:
        self._node = node
        self._url = url.rstrip("/")
        self._client = client
        self._token_file = token_file

    @property
    def node(self) -> str:
        return self._node

    def _token(self) -> str:
        try:
            return read_token(self._token_file)
        except OSError as exc:
            raise hub_errors.HubError(reasons.INVALID_REQUEST,
                                      "the peer token cannot be read") from exc

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"authorization": f"Bearer {self._token()}", **(extra or {})}

    async def manifest(self, digest: str) -> bytes:
        url = self._url + wire.tree_path(layout.hex_of(digest))
        try:
            async with self._client.http.stream("GET", url, headers=self._headers()) as answer:
                _check(answer)
                data = bytearray()
                async for chunk in answer.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_MANIFEST_BYTES:
                        raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, "listing too large")
                return bytes(data)
        except httpx.HTTPError as exc:
            raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, type(exc).__name__) from exc

    async def held(self, idents: Sequence[tuple[str, str]]
                   ) -> dict[tuple[str, str], int | None]:
        """Which of ``idents`` the peer stores (None) or is fetching (the bytes so far):
        ``wire.parse_held_answer``, asked ``wire.MAX_HELD`` at a time; ``HubError``."""
        held: dict[tuple[str, str], int | None] = {}
        url = self._url + wire.HELD_PATH
        for first in range(0, len(idents), wire.MAX_HELD):
            batch = list(idents[first:first + wire.MAX_HELD])
            try:
                async with self._client.http.stream(
                        "POST", url, headers=self._headers(), content=wire.held_request(batch)
                ) as answer:
                    _check(answer)
                    data = bytearray()
                    async for chunk in answer.aiter_bytes():
                        data += chunk
                        if len(data) > wire.MAX_HELD_BODY:
                            raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                                      "held answer too large")
            except httpx.HTTPError as exc:
                raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                          type(exc).__name__) from exc
            held.update(wire.parse_held_answer(bytes(data), set(batch)))
        return held

    def open_file(self, ident: tuple[str, str], *, start: int, end: int,
                  read_timeout: float | None = None) -> blocking.RangeBody:
        """Bytes ``start``..``end`` of the peer's stored file ``ident`` (blocking, as
        ``open_range``)."""
        return blocking.open_range(
            self._client.connections, self._url + wire.stored_file_path(*ident),
            endpoint=self._url, token=self._token(), what=f"peer {self._node} stored file",
            mapper=_mapped, start=start, end=end, read_timeout=read_timeout, follow=False,
        )

    async def stream_file(self, ident: tuple[str, str], *, start: int, end: int
                          ) -> AsyncIterator[bytes]:
        async for chunk in self._stream(self._url + wire.stored_file_path(*ident), start, end):
            yield chunk

    def open_range(self, digest: str, path: str, *, start: int, end: int,
                   read_timeout: float | None = None) -> blocking.RangeBody:
        """Bytes ``start``..``end`` (inclusive) of one file, to ``readinto`` (blocking: call in
        a worker thread). The answer must be the 206 of exactly that range; a redirect is not
        followed (a peer has none to give)."""
        return blocking.open_range(
            self._client.connections, self._url + wire.file_path(layout.hex_of(digest), path),
            endpoint=self._url, token=self._token(), what=f"peer {self._node} file {path}",
            mapper=_mapped, start=start, end=end, read_timeout=read_timeout, follow=False,
        )

    async def stream(self, digest: str, path: str, *, start: int, end: int
                     ) -> AsyncIterator[bytes]:
        url = self._url + wire.file_path(layout.hex_of(digest), path)
        async for chunk in self._stream(url, start, end):
            yield chunk

    async def _stream(self, url: str, start: int, end: int) -> AsyncIterator[bytes]:
        headers = self._headers({"range": f"bytes={start}-{end}"})
        try:
            async with self._client.http.stream("GET", url, headers=headers) as answer:
                _check(answer)
                if answer.status_code != 206:
                    raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                              "the peer ignored the range")
                async for chunk in answer.aiter_raw():
                    yield chunk
        except httpx.HTTPError as exc:
            raise hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, type(exc).__name__) from exc


def _refusal(status: int) -> hub_errors.HubError:
    if status in (401, 403):
        return hub_errors.HubError(reasons.ACCESS_DENIED,
                                   "the peer refused the token", status=status)
    return hub_errors.HubError(reasons.SOURCE_UNAVAILABLE,
                               "the peer cannot serve it", status=status)


def _check(answer: httpx.Response) -> None:
    if answer.status_code >= 300:
        raise _refusal(answer.status_code)


def _mapped(answer: httpx.Response, body: bytes, what: str) -> hub_errors.HubError:
    """``hub.fetch.ErrorMapper`` for the blocking path (a status of 400 or more)."""
    return _refusal(answer.status_code)


def make_client(ca_file: str | None, timeout: float = 30.0) -> Client:
    """Both halves of the peers' client: TLS verified only against ``ca_file`` when given, no
    proxy (peers are reached directly), ``timeout`` to connect and for any byte to arrive."""
    if ca_file:
        context = ssl.create_default_context(cafile=ca_file)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    settings = hub_config.HubConfig(connect_timeout=timeout, read_timeout=timeout)
    return Client(httpx.AsyncClient(verify=context, timeout=timeout, http2=False, trust_env=False),
                  blocking.Connections(settings, user_agent="model-manager-peer/1",
                                       context=context))
