"""One peer as a byte source (``materialize.peers.Candidate``) over HTTPS.

Every request carries this plugin's projected token for ``wire.AUDIENCE``, read from its file
each time (kubelet rotates it). The peer's answers are bound by the downloader (the manifest to
the digest, every byte to its file's hash), so its certificate need not chain to anything the
node trusts; ``verify`` may still name a CA. Failures become ``hub.errors.HubError``
(``SourceUnavailable``, ``AccessDenied`` for 401/403), so the range loop treats them as it does
a hub's.
"""

from __future__ import annotations

import pathlib
import ssl
from collections.abc import AsyncIterator

import httpx

from hub import errors as hub_errors
from nodeplugin.cache import layout
from nodeplugin.peer import wire

MAX_MANIFEST_BYTES = 16 << 20


def read_token(path: str) -> str:
    return pathlib.Path(path).read_text().strip()


class Peer:
    def __init__(self, node: str, url: str, client: httpx.AsyncClient, token_file: str) -> None:
        self._node = node
        self._url = url.rstrip("/")
        self._client = client
        self._token_file = token_file

    @property
    def node(self) -> str:
        return self._node

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        try:
            token = read_token(self._token_file)
        except OSError as exc:
            raise hub_errors.HubError("InvalidRequest", "the peer token cannot be read") from exc
        return {"authorization": f"Bearer {token}", **(extra or {})}

    async def manifest(self, digest: str) -> bytes:
        url = self._url + wire.tree_path(layout.hex_of(digest))
        try:
            async with self._client.stream("GET", url, headers=self._headers()) as answer:
                _check(answer)
                data = bytearray()
                async for chunk in answer.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_MANIFEST_BYTES:
                        raise hub_errors.HubError("SourceUnavailable", "listing too large")
                return bytes(data)
        except httpx.HTTPError as exc:
            raise hub_errors.HubError("SourceUnavailable", type(exc).__name__) from exc

    async def stream(self, digest: str, path: str, *, start: int, end: int
                     ) -> AsyncIterator[bytes]:
        url = self._url + wire.file_path(layout.hex_of(digest), path)
        headers = self._headers({"range": f"bytes={start}-{end}"})
        try:
            async with self._client.stream("GET", url, headers=headers) as answer:
                _check(answer)
                if answer.status_code != 206:
                    raise hub_errors.HubError("SourceUnavailable", "the peer ignored the range")
                async for chunk in answer.aiter_raw():
                    yield chunk
        except httpx.HTTPError as exc:
            raise hub_errors.HubError("SourceUnavailable", type(exc).__name__) from exc


def _check(answer: httpx.Response) -> None:
    if answer.status_code in (401, 403):
        raise hub_errors.HubError("AccessDenied", "the peer refused the token",
                                  status=answer.status_code)
    if answer.status_code >= 300:
        raise hub_errors.HubError("SourceUnavailable", "the peer cannot serve it",
                                  status=answer.status_code)


def make_client(ca_file: str | None, timeout: float = 30.0) -> httpx.AsyncClient:
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file \
        else False
    return httpx.AsyncClient(verify=verify, timeout=timeout, http2=False)
