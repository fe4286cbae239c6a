"""The seam both hubs implement, so the resolver and the downloader need not know which hub."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import Protocol

from hub import errors, files

COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


class Source(Protocol):
    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        """The 40-hex commit a branch, tag or commit names."""
        ...

    async def list_files(
        self, repo: str, commit: str, *, token: str | None
    ) -> list[files.RemoteFile]:
        """Every file of the commit with its size and digest."""
        ...

    def stream(
        self,
        repo: str,
        commit: str,
        path: str,
        *,
        start: int = 0,
        end: int | None = None,
        token: str | None,
    ) -> AsyncGenerator[bytes, None]:
        """Bytes ``start``..``end`` (inclusive; None = to the end) of one file, as they arrive."""
        ...


def check_repo(repo: str) -> None:
    if not _REPO.fullmatch(repo) or ".." in repo:
        raise errors.HubError("InvalidRequest", f"repository {repo!r} is not an owner/name id")


def check_commit(commit: str) -> None:
    if not COMMIT.fullmatch(commit):
        raise errors.HubError("InvalidRequest", "a commit must be 40 lowercase hex digits")
