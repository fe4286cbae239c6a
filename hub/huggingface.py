"""Hugging Face Hub access: revision to commit, the paginated recursive tree, ranged downloads.

Wire facts are in ``docs/hub.md`` (and the design's protocols/hub.md). Only model repositories
are supported, which is all the artifact's ``huggingface`` source names.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator
from typing import NotRequired, TypedDict, cast
from urllib import parse

import httpx

from hub import blocking, errors, fetch, files, source
from openapi import grammar

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_PAGES = 100_000


class LfsInfo(TypedDict):
    oid: str
    size: int
    pointerSize: NotRequired[int]


class TreeEntry(TypedDict):
    type: str
    path: str
    oid: str
    size: int
    lfs: NotRequired[LfsInfo]


class RevisionInfo(TypedDict):
    id: str
    sha: str


def map_error(response: httpx.Response, body: bytes, what: str) -> errors.HubError:
    """The error mapping of ``hf_raise_for_status`` narrowed to the API's failure reasons."""
    status = response.status_code
    code = response.headers.get("x-error-code", "")
    message = response.headers.get("x-error-message", "")
    if code == "RevisionNotFound":
        return errors.HubError("RevisionNotFound", f"{what}: revision not found", status=status)
    if code == "EntryNotFound":
        return errors.HubError("EntryNotFound", f"{what}: file not found", status=status)
    if (
        code in ("RepoNotFound", "GatedRepo")
        or status in (401, 403, 404)
        or message == "Access to this resource is disabled."
    ):
        return errors.HubError("AccessDenied", f"{what} {errors.NOT_ACCESSIBLE}", status=status)
    if status == 429:
        return errors.HubError(
            "SourceUnavailable",
            f"{what}: rate limited (429)",
            status=status,
            retry_after=fetch.retry_after(response),
        )
    if status >= 500 or status == 408:
        return errors.HubError("SourceUnavailable", f"{what}: HTTP {status}", status=status)
    return errors.HubError("InvalidRequest", f"{what}: HTTP {status}", status=status)


def _bad_listing(what: str, detail: str) -> errors.HubError:
    return errors.HubError("SourceUnavailable", f"{what}: unexpected tree listing ({detail})")


def parse_entry(raw: object, what: str) -> files.RemoteFile | None:
    """One tree entry as a file (None for a directory); a masked LFS digest is a refusal."""
    if not isinstance(raw, dict):
        raise _bad_listing(what, "an entry is not an object")
    entry = cast(TreeEntry, raw)
    kind, path = entry.get("type"), entry.get("path")
    if not isinstance(path, str):
        raise _bad_listing(what, "an entry has no path")
    if kind == "directory":
        return None
    if kind != "file":
        raise _bad_listing(what, f"{path}: unknown entry type")
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _bad_listing(what, f"{path}: no size")
    lfs = entry.get("lfs")
    if lfs is not None:
        oid = lfs.get("oid") if isinstance(lfs, dict) else None
        if isinstance(oid, str) and "*" in oid:
            # A gated repository answers the tree but masks the LFS digests of those it refuses.
            raise errors.HubError("AccessDenied", f"{what} {errors.NOT_ACCESSIBLE}")
        if not isinstance(oid, str) or not _SHA256.fullmatch(oid):
            raise _bad_listing(what, f"{path}: LFS entry without a sha256")
        lfs_size = lfs.get("size", size)
        if lfs_size != size:
            raise _bad_listing(what, f"{path}: LFS size disagrees with the entry size")
        return files.RemoteFile(path, size, "sha256", oid, True)
    oid = entry.get("oid")
    if not isinstance(oid, str) or not grammar.is_commit(oid):
        raise _bad_listing(what, f"{path}: no git blob id")
    return files.RemoteFile(path, size, "gitsha1", oid, False)


class HuggingFace:
    """One hub endpoint over a shared client; the token is per call, for that repository only."""

    def __init__(
        self, client: httpx.AsyncClient, endpoint: str, *,
        connections: blocking.Connections | None = None,
    ) -> None:
        self._client = client
        self._endpoint = endpoint.rstrip("/")
        self._ranges = blocking.Ranges(connections, self._endpoint, label="huggingface.co",
                                       mapper=map_error)

    @property
    def can_open_ranges(self) -> bool:
        """Whether ``open_range`` (the blocking fast path) is available."""
        return self._ranges.available

    @property
    def endpoint(self) -> str:
        return self._endpoint

    async def _json(self, url: str, *, token: str | None, what: str) -> tuple[object, str | None]:
        """GET a JSON document; returns it and the ``rel="next"`` link, if any."""
        async with fetch.open_response(
            self._client,
            "GET",
            url,
            endpoint=self._endpoint,
            token=token,
            what=what,
            mapper=map_error,
            headers={"accept": "application/json"},
        ) as response:
            try:
                await response.aread()
                document: object = response.json()
            except httpx.HTTPError as exc:
                raise errors.from_transport(exc, what) from exc
            except ValueError as exc:
                raise errors.HubError("SourceUnavailable", f"{what}: answer is not JSON") from exc
            next_link = response.links.get("next", {}).get("url")
            if next_link is not None:
                next_link = str(response.url.join(next_link))
            return document, next_link

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        """The commit ``revision`` names; a 40-hex revision too is confirmed by the Hub."""
        source.check_repo(repo)
        source.check_revision(revision)
        what = f"huggingface.co model {repo}"
        url = (
            f"{self._endpoint}/api/models/{repo}/revision/{parse.quote(revision, safe='')}"
        )
        document, _ = await self._json(url, token=token, what=what)
        sha = document.get("sha") if isinstance(document, dict) else None
        if not isinstance(sha, str) or not grammar.is_commit(sha):
            raise errors.HubError("SourceUnavailable", f"{what}: revision answer has no commit")
        if grammar.is_commit(revision) and sha != revision:
            raise errors.HubError(
                "SourceUnavailable", f"{what}: the Hub names another commit for {revision}"
            )
        return sha

    async def list_files(
        self, repo: str, commit: str, *, token: str | None
    ) -> list[files.RemoteFile]:
        """Every file of the commit, walking every ``Link: rel="next"`` page."""
        source.check_repo(repo)
        source.check_commit(commit)
        what = f"huggingface.co model {repo}"
        url: str | None = (
            f"{self._endpoint}/api/models/{repo}/tree/{commit}?recursive=true&expand=false"
        )
        home = fetch.origin(httpx.URL(self._endpoint))
        seen_pages: set[str] = set()
        seen_paths: set[str] = set()
        listed: list[files.RemoteFile] = []
        while url is not None:
            if url in seen_pages or len(seen_pages) >= _MAX_PAGES:
                raise _bad_listing(what, "pagination loops")
            if fetch.origin(httpx.URL(url)) != home:
                raise _bad_listing(what, "a next page on another origin")
            seen_pages.add(url)
            document, url = await self._json(url, token=token, what=what)
            if not isinstance(document, list):
                raise _bad_listing(what, "not a list")
            for raw in document:
                remote = parse_entry(raw, what)
                if remote is None:
                    continue
                if remote.path in seen_paths:
                    raise _bad_listing(what, f"{remote.path} listed twice")
                seen_paths.add(remote.path)
                listed.append(remote)
        return listed

    def file_url(self, repo: str, commit: str, path: str) -> str:
        return f"{self._endpoint}/{repo}/resolve/{commit}/{parse.quote(path)}"

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
            what=f"huggingface.co model {repo} file {path}",
            mapper=map_error,
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
        what = f"huggingface.co model {repo}"
        async with fetch.open_response(
            self._client,
            "HEAD",
            f"{self._endpoint}/api/models/{repo}/resolve/{commit}/{parse.quote(path)}",
            endpoint=self._endpoint,
            token=token,
            what=what,
            mapper=_head_error,
            follow=False,
        ):
            return


def _head_error(response: httpx.Response, body: bytes, what: str) -> errors.HubError:
    # At revalidation every 404 is an access refusal, whatever its X-Error-Code says.
    if response.status_code == 404:
        return errors.HubError(
            "AccessDenied", f"{what} {errors.NOT_ACCESSIBLE}", status=response.status_code
        )
    return map_error(response, body, what)
