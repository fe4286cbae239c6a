"""The seam both hubs implement, so the resolver and the downloader need not know which hub."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol

from hub import errors, files
from openapi import grammar


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
    """The repository grammar admission applies (``openapi.grammar``), so what was admitted is
    never refused here for its shape."""
    if not grammar.is_repository(repo):
        raise errors.HubError("InvalidRequest", f"repository {repo[:200]!r} is not an owner/name "
                              "id")


def check_revision(revision: str) -> None:
    problem = grammar.revision_problem(revision)
    if problem:
        raise errors.HubError("InvalidRequest", f"revision {revision[:200]!r} {problem}")


def check_commit(commit: str) -> None:
    if not grammar.is_commit(commit):
        raise errors.HubError("InvalidRequest", "a commit must be 40 lowercase hex digits")
