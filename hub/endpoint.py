"""What both hubs do alike: one endpoint over a shared client, its JSON GET, the ranged download
(streamed, or read by worker threads through ``hub.blocking``) and the revalidation HEAD.

``huggingface.HuggingFace`` and ``modelscope.ModelScope`` subclass ``Endpoint`` and keep only what
differs: their URLs, their error mapping and the API calls that are theirs alone (revisions,
listings, the token check).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncGenerator
from typing import ClassVar
from urllib import parse

import httpx

from hub import blocking, errors, fetch, source
from openapi import reasons


class Endpoint(abc.ABC):
    """One hub endpoint over a shared client; the token is per call, for that repository only.

    A subclass names its hub (``label``; error messages name the configured endpoint's host,
    ``host``, and the label only when the endpoint has none), its error mapping
    (``mapper``) and its file URL (``file_url``); ``head_url`` and ``head_mapper`` default to
    those two and are overridden where the revalidation HEAD asks elsewhere or maps otherwise.
    """

    label: ClassVar[str]

    def __init__(
        self, client: httpx.AsyncClient, endpoint: str, *, mapper: fetch.ErrorMapper,
        connections: blocking.Connections | None = None,
    ) -> None:
        self._client = client
        self._endpoint = endpoint.rstrip("/")
        self._mapper = mapper
        self.host = parse.urlsplit(self._endpoint).netloc or self.label
        """The configured endpoint's host, as every error message names the hub (a mirror's,
        never a hard-coded public host)."""
        self._ranges = blocking.Ranges(connections, self._endpoint, label=self.host,
                                       mapper=mapper)

    @property
    def can_open_ranges(self) -> bool:
        """Whether ``open_range`` (the blocking fast path) is available."""
        return self._ranges.available

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def describe(self, repo: str) -> str:
        """How error messages name the repository: the configured endpoint's host
        (``huggingface.co model org/name``, ``hf-mirror.com model org/name``)."""
        return f"{self.host} model {repo}"

    def listing(self, repo: str, commit: str) -> str:
        """Check a listing's repository and commit; what its messages call the model."""
        source.check_repo(repo)
        source.check_commit(commit)
        return self.describe(repo)

    @abc.abstractmethod
    def file_url(self, repo: str, commit: str, path: str) -> str:
        """Where a file's bytes are downloaded from."""

    def head_url(self, repo: str, commit: str, path: str) -> str:
        """Where revalidation's HEAD asks: the download URL unless the hub has a better one."""
        return self.file_url(repo, commit, path)

    def head_mapper(self, response: httpx.Response, body: bytes, what: str) -> errors.HubError:
        """Revalidation's error mapping: the hub's own unless a subclass narrows it."""
        return self._mapper(response, body, what)

    async def get_json(
        self, url: str, *, token: str | None, what: str, mapper: fetch.ErrorMapper | None = None,
    ) -> tuple[object, str | None]:
        """GET a JSON document; returns it and the absolute ``rel="next"`` link, if any."""
        async with fetch.open_response(
            self._client,
            "GET",
            url,
            endpoint=self._endpoint,
            token=token,
            what=what,
            mapper=mapper or self._mapper,
            headers={"accept": "application/json"},
        ) as response:
            try:
                await response.aread()
                document: object = response.json()
            except httpx.HTTPError as exc:
                raise errors.from_transport(exc, what) from exc
            except ValueError as exc:
                raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                      f"{what}: answer is not JSON") from exc
            next_link = response.links.get("next", {}).get("url")
            if next_link is not None:
                next_link = str(response.url.join(next_link))
            return document, next_link

    async def stream(
        self,
        repo: str,
        commit: str,
        path: str,
        *,
        start: int = 0,
        end: int | None = None,
        token: str | None,
    ) -> AsyncGenerator[bytes, None]:
        """Bytes ``start``..``end`` (inclusive, as in HTTP ``Range``; None = to the end).

        Use under ``contextlib.aclosing`` so an abandoned stream releases its connection.
        """
        source.check_repo(repo)
        source.check_commit(commit)
        chunks = fetch.stream_range(
            self._client,
            self.file_url(repo, commit, path),
            endpoint=self._endpoint,
            token=token,
            what=f"{self.describe(repo)} file {path}",
            mapper=self._mapper,
            start=start,
            end=end,
        )
        async with contextlib.aclosing(chunks) as body:
            async for chunk in body:
                yield chunk

    def open_range(
        self, repo: str, commit: str, path: str, *, start: int, end: int, token: str | None,
        read_timeout: float | None = None,
    ) -> blocking.RangeBody:
        """``stream``'s bytes read by a worker thread (blocking; ``can_open_ranges`` first)."""
        source.check_repo(repo)
        source.check_commit(commit)
        return self._ranges.open(self.file_url(repo, commit, path), repo=repo, path=path,
                                 token=token, start=start, end=end, read_timeout=read_timeout)

    async def check_access(self, repo: str, commit: str, path: str, *, token: str | None) -> None:
        """Revalidation: one HEAD of a file at the commit, redirects not followed."""
        source.check_repo(repo)
        source.check_commit(commit)
        async with fetch.open_response(
            self._client,
            "HEAD",
            self.head_url(repo, commit, path),
            endpoint=self._endpoint,
            token=token,
            what=self.describe(repo),
            mapper=self.head_mapper,
            follow=False,
        ):
            return
