"""The seam both hubs implement, so the resolver and the downloader need not know which hub."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol, runtime_checkable

from hub import blocking, errors, files
from openapi import grammar, reasons


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


@runtime_checkable
class BlockingRanges(Protocol):
    """A source that can also read ranges in a worker thread (``hub.blocking``), the
    downloader's fast path; ``can_open_ranges`` is False when it was built without that."""

    @property
    def can_open_ranges(self) -> bool: ...

    def open_range(
        self, repo: str, commit: str, path: str, *, start: int, end: int, token: str | None,
        read_timeout: float | None = None,
    ) -> blocking.RangeBody:
        """Bytes ``start``..``end`` (inclusive) of one file, to ``readinto`` (blocking)."""
        ...


def check_repo(repo: str) -> None:
    """The repository grammar admission applies (``openapi.grammar``), so what was admitted is
    never refused here for its shape."""
    if not grammar.is_repository(repo):
        raise errors.HubError(reasons.INVALID_REQUEST,
                              f"repository {repo[:200]!r} is not an owner/name "
                              "id")


def check_revision(revision: str) -> None:
    problem = grammar.revision_problem(revision)
    if problem:
        raise errors.HubError(reasons.INVALID_REQUEST, f"revision {revision[:200]!r} {problem}")


def check_commit(commit: str) -> None:
    if not grammar.is_commit(commit):
        raise errors.HubError(reasons.INVALID_REQUEST, "a commit must be 40 lowercase hex digits")
