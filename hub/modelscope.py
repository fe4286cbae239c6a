"""ModelScope access: revision to commit (cross-checked against git), the file listing with its
silent 3000-entry truncation handled, ranged downloads, and the token check. Every file is
identified by the hub's ``Sha256``.
"""

from __future__ import annotations

import json
import re
from typing import NotRequired, TypedDict, cast
from urllib import parse

import httpx

from hub import blocking, endpoint, errors, fetch, files, gitrefs, source
from openapi import grammar, reasons

TRUNCATION_LIMIT = 3000
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_REVISION_NOT_FOUND = 10990101004
_ACCESS_CODES = frozenset({10010205001, 10010200001})


class Envelope(TypedDict):
    Code: int
    Data: NotRequired[object]
    Message: NotRequired[str]
    Success: NotRequired[bool]


class RepoFile(TypedDict):
    Name: str
    Path: str
    Type: str  # "blob" or "tree"
    Size: int
    Sha256: NotRequired[str]
    IsLFS: NotRequired[bool]
    Revision: NotRequired[str]


def code_of(body: bytes) -> int | None:
    """The envelope's ``Code`` in an error body, if it has one."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    code = document.get("Code") if isinstance(document, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def map_error(response: httpx.Response, body: bytes, what: str) -> errors.HubError:
    """ModelScope's errors: no distinct 401/403; "no access" and "not found" answer alike."""
    return _error_for(response.status_code, code_of(body), what, response)


def _error_for(
    status: int, code: int | None, what: str, response: httpx.Response | None
) -> errors.HubError:
    if code == _REVISION_NOT_FOUND:
        return errors.HubError(reasons.REVISION_NOT_FOUND,
                               f"{what}: revision not found", status=status)
    if code in _ACCESS_CODES or status in (401, 403, 404):
        return errors.HubError(reasons.ACCESS_DENIED,
                               f"{what} {errors.NOT_ACCESSIBLE}", status=status)
    if status == 429:
        wait = fetch.retry_after(response) if response is not None else None
        return errors.HubError(
            reasons.SOURCE_UNAVAILABLE, f"{what}: rate limited (429)", status=status,
            retry_after=wait,
        )
    if status >= 500 or status == 408 or status == 200:
        return errors.HubError(
            reasons.SOURCE_UNAVAILABLE, f"{what}: HTTP {status} code {code}", status=status
        )
    return errors.HubError(reasons.INVALID_REQUEST,
                           f"{what}: HTTP {status} code {code}", status=status)


class ModelScope(endpoint.Endpoint):
    """One ModelScope endpoint (``endpoint.Endpoint`` downloads and revalidates)."""

    label = "modelscope"

    def __init__(
        self, client: httpx.AsyncClient, endpoint: str, *, truncation_limit: int = TRUNCATION_LIMIT,
        connections: blocking.Connections | None = None,
    ) -> None:
        super().__init__(client, endpoint, mapper=map_error, connections=connections)
        self._truncation_limit = truncation_limit

    async def _data(self, url: str, *, token: str | None, what: str) -> object:
        """GET an enveloped answer and return its ``Data``; ``Code`` must be 200."""
        document, _ = await self.get_json(url, token=token, what=what)
        if not isinstance(document, dict) or not isinstance(document.get("Code"), int):
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: answer has no Code")
        envelope = cast(Envelope, document)
        if envelope["Code"] != 200:
            raise _error_for(200, envelope["Code"], what, None)
        return envelope.get("Data")

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        """A full commit as is; a branch or tag through the commits API, cross-checked against
        the refs git advertises (the peeled commit of an annotated tag). A disagreement is
        ``SourceUnavailable``: the index and git naming different commits is exactly how a wrong
        revision would resolve silently."""
        source.check_repo(repo)
        if grammar.is_commit(revision):
            return revision
        source.check_revision(revision)
        what = self.describe(repo)
        query = parse.urlencode({"Ref": revision, "PageNumber": 1, "PageSize": 1})
        data = await self._data(
            f"{self._endpoint}/api/v1/models/{repo}/commits?{query}", token=token, what=what
        )
        commits = data.get("Commit") if isinstance(data, dict) else None
        if not isinstance(commits, list) or not commits:
            raise errors.HubError(reasons.REVISION_NOT_FOUND, f"{what}: revision not found")
        first = commits[0]
        commit = first.get("Id") if isinstance(first, dict) else None
        if not isinstance(commit, str) or not grammar.is_commit(commit):
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                  f"{what}: commits answer has no commit id")
        refs = await gitrefs.list_refs(self._client, self.git_url(repo), endpoint=self._endpoint,
                                       token=token, what=what, mapper=map_error)
        named = gitrefs.commit_for(refs, revision)
        if named != commit:
            seen = f"names {named}" if named else "has no such ref"
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE,
                f"{what}: the hub's index names commit {commit} for {revision!r} but git "
                f"{seen}; refusing to guess",
            )
        return commit

    def git_url(self, repo: str) -> str:
        return f"{self._endpoint}/{repo}.git"

    async def check_token(self, *, token: str) -> None:
        """``GET /openapi/v1/users/me``: ``AccessDenied`` when the hub rejects the token (the
        repository endpoints cannot tell a mistyped token from a missing grant)."""
        what = "modelscope token check"
        document, _ = await self.get_json(f"{self._endpoint}/openapi/v1/users/me", token=token,
                                          what=what, mapper=_token_error)
        if not isinstance(document, dict) or document.get("success") is not True:
            raise errors.HubError(reasons.ACCESS_DENIED,
                                  f"{what}: the hub did not accept the token")

    async def _page(
        self, repo: str, commit: str, root: str, recursive: bool, *, token: str | None
    ) -> list[RepoFile]:
        what = self.describe(repo)
        params = {"Revision": commit, "Recursive": "True" if recursive else "False"}
        if root:
            params["Root"] = root
        url = f"{self._endpoint}/api/v1/models/{repo}/repo/files?{parse.urlencode(params)}"
        data = await self._data(url, token=token, what=what)
        listed = data.get("Files") if isinstance(data, dict) else None
        if not isinstance(listed, list) or not all(isinstance(f, dict) for f in listed):
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: listing has no file tree")
        return cast(list[RepoFile], listed)

    async def _walk(
        self, repo: str, commit: str, root: str, *, token: str | None
    ) -> list[RepoFile]:
        """Everything below ``root``: one recursive page when it is not full, otherwise its
        direct children and a walk of each subdirectory."""
        whole = await self._page(repo, commit, root, True, token=token)
        if len(whole) < self._truncation_limit:
            return whole
        children = await self._page(repo, commit, root, False, token=token)
        if len(children) >= self._truncation_limit:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE,
                f"{self.describe(repo)}: directory {root or '/'} has {self._truncation_limit} or "
                "more entries, which the API cannot enumerate",
            )
        found = [child for child in children if child.get("Type") != "tree"]
        for child in children:
            if child.get("Type") == "tree":
                path = child.get("Path")
                if not isinstance(path, str) or not path or path == root:
                    raise errors.HubError(
                        reasons.SOURCE_UNAVAILABLE, f"{self.describe(repo)}: bad directory entry"
                    )
                found.extend(await self._walk(repo, commit, path, token=token))
        return found

    async def list_files(
        self, repo: str, commit: str, *, token: str | None
    ) -> list[files.RemoteFile]:
        """Every file of the commit; each must carry the hub's ``Sha256``."""
        what = self.listing(repo, commit)
        listed: dict[str, files.RemoteFile] = {}
        for raw in await self._walk(repo, commit, "", token=token):
            if raw.get("Type") == "tree":
                continue
            path, size, sha = raw.get("Path"), raw.get("Size"), raw.get("Sha256")
            if raw.get("Type") != "blob" or not isinstance(path, str):
                raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                      f"{what}: unexpected listing entry")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: {path} has no size")
            if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
                raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: {path} has no Sha256")
            remote = files.RemoteFile(path, size, "sha256", sha.lower(), bool(raw.get("IsLFS")))
            if listed.setdefault(path, remote) != remote:
                raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: {path} listed twice")
        return list(listed.values())

    def file_url(self, repo: str, commit: str, path: str) -> str:
        query = parse.urlencode({"Revision": commit, "FilePath": path}, quote_via=parse.quote_plus)
        return f"{self._endpoint}/api/v1/models/{repo}/repo?{query}"


def _token_error(response: httpx.Response, body: bytes, what: str) -> errors.HubError:
    if response.status_code in (401, 403):
        return errors.HubError(reasons.ACCESS_DENIED, f"{what}: the hub rejected the token",
                               status=response.status_code)
    return map_error(response, body, what)
