"""Hugging Face Hub access: revision to commit, the paginated recursive tree, ranged downloads.

Wire facts are in ``docs/hub.md`` (and the design's protocols/hub.md). Only model repositories
are supported, which is all the artifact's ``huggingface`` source names.
"""

from __future__ import annotations

import re
from typing import NotRequired, TypedDict, cast
from urllib import parse

import httpx

from hub import blocking, endpoint, errors, fetch, files, source
from openapi import grammar, reasons

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
        return errors.HubError(reasons.REVISION_NOT_FOUND,
                               f"{what}: revision not found", status=status)
    if code == "EntryNotFound":
        return errors.HubError(reasons.ENTRY_NOT_FOUND, f"{what}: file not found", status=status)
    if (
        code in ("RepoNotFound", "GatedRepo")
        or status in (401, 403, 404)
        or message == "Access to this resource is disabled."
    ):
        return errors.HubError(reasons.ACCESS_DENIED,
                               f"{what} {errors.NOT_ACCESSIBLE}", status=status)
    if status == 429:
        return errors.HubError(
            reasons.SOURCE_UNAVAILABLE,
            f"{what}: rate limited (429)",
            status=status,
            retry_after=fetch.retry_after(response),
        )
    if status >= 500 or status == 408:
        return errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: HTTP {status}", status=status)
    return errors.HubError(reasons.INVALID_REQUEST, f"{what}: HTTP {status}", status=status)


def _bad_listing(what: str, detail: str) -> errors.HubError:
    return errors.HubError(reasons.SOURCE_UNAVAILABLE,
                           f"{what}: unexpected tree listing ({detail})")


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
            raise errors.HubError(reasons.ACCESS_DENIED, f"{what} {errors.NOT_ACCESSIBLE}")
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


class HuggingFace(endpoint.Endpoint):
    """One Hugging Face Hub endpoint (``endpoint.Endpoint`` downloads and revalidates)."""

    label = "huggingface.co"

    def __init__(
        self, client: httpx.AsyncClient, endpoint: str, *,
        connections: blocking.Connections | None = None,
    ) -> None:
        super().__init__(client, endpoint, mapper=map_error, connections=connections)

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        """The commit ``revision`` names; a 40-hex revision too is confirmed by the Hub."""
        source.check_repo(repo)
        source.check_revision(revision)
        what = self.describe(repo)
        url = (
            f"{self._endpoint}/api/models/{repo}/revision/{parse.quote(revision, safe='')}"
        )
        document, _ = await self.get_json(url, token=token, what=what)
        sha = document.get("sha") if isinstance(document, dict) else None
        if not isinstance(sha, str) or not grammar.is_commit(sha):
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                  f"{what}: revision answer has no commit")
        if grammar.is_commit(revision) and sha != revision:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE, f"{what}: the Hub names another commit for {revision}"
            )
        return sha

    async def list_files(
        self, repo: str, commit: str, *, token: str | None
    ) -> list[files.RemoteFile]:
        """Every file of the commit, walking every ``Link: rel="next"`` page."""
        what = self.listing(repo, commit)
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
            document, url = await self.get_json(url, token=token, what=what)
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

    def head_url(self, repo: str, commit: str, path: str) -> str:
        """Revalidation asks the API's resolve route (``docs/controllers.md``, Revalidation)."""
        return f"{self._endpoint}/api/models/{repo}/resolve/{commit}/{parse.quote(path)}"

    def head_mapper(self, response: httpx.Response, body: bytes, what: str) -> errors.HubError:
        # At revalidation every 404 is an access refusal, whatever its X-Error-Code says.
        if response.status_code == 404:
            return errors.HubError(
                reasons.ACCESS_DENIED, f"{what} {errors.NOT_ACCESSIBLE}",
                status=response.status_code,
            )
        return map_error(response, body, what)
