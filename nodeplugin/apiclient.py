"""List and watch ``modelartifacts`` across namespaces over HTTP (the informer's client seam).

``ArtifactClient`` is the Protocol the informer depends on; ``HttpArtifactClient`` implements it
with httpx against the Kubernetes REST semantics (paged list with ``continue``, JSON-lines watch
with ``resourceVersion`` and bookmarks, 410 Gone for a too-old version).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol, TypedDict

import httpx

from nodeplugin import kubeconfig

PATH = "/apis/worker.gpustack.ai/v1/modelartifacts"
WATCH_TIMEOUT_SECONDS = 290
"""The server ends each watch after this; the informer resumes from its last version."""


class ListPage(TypedDict):
    items: list[dict[str, Any]]
    resourceVersion: str
    continueToken: str


class WatchEvent(TypedDict):
    type: str
    """ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""
    object: dict[str, Any]


class Gone(Exception):
    """410: the resource version (or continue token) is too old; list again."""


class ApiError(Exception):
    """Any other failure talking to the API (message carries no credential)."""


class ArtifactClient(Protocol):
    async def list_page(self, *, limit: int, continue_token: str) -> ListPage: ...

    def watch(self, resource_version: str) -> AsyncIterator[WatchEvent]: ...

    async def aclose(self) -> None: ...


class HttpArtifactClient:
    def __init__(
        self,
        connection: kubeconfig.Connection,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._connection = connection
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = self._connection.http_client(
                timeout=httpx.Timeout(30.0, read=WATCH_TIMEOUT_SECONDS + 30.0),
                transport=self._transport,
            )
        return self._http

    async def list_page(self, *, limit: int, continue_token: str) -> ListPage:
        params: dict[str, str | int] = {"limit": limit}
        if continue_token:
            params["continue"] = continue_token
        try:
            response = await self._client().get(PATH, params=params)
        except httpx.HTTPError as exc:
            raise ApiError(f"listing modelartifacts: {type(exc).__name__}: {exc}") from exc
        _check(response)
        body = response.json()
        meta = body.get("metadata") or {}
        return ListPage(
            items=list(body.get("items") or []),
            resourceVersion=str(meta.get("resourceVersion") or ""),
            continueToken=str(meta.get("continue") or ""),
        )

    async def watch(self, resource_version: str) -> AsyncIterator[WatchEvent]:
        params: dict[str, str | int] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": WATCH_TIMEOUT_SECONDS,
        }
        try:
            async with self._client().stream("GET", PATH, params=params) as response:
                if response.status_code != 200:
                    await response.aread()
                    _check(response)
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError as exc:
                        raise ApiError("watch sent a line that is not JSON") from exc
                    yield WatchEvent(type=str(event.get("type")), object=event.get("object") or {})
        except httpx.HTTPError as exc:
            raise ApiError(f"watching modelartifacts: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def _check(response: httpx.Response) -> None:
    if response.status_code == 410:
        raise Gone("resource version too old")
    if response.status_code >= 400:
        message = ""
        with contextlib.suppress(ValueError):
            message = str(response.json().get("message", ""))
        raise ApiError(f"API answered {response.status_code} {message}".strip())
