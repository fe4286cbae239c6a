"""The hub side of an artifact resolved without a commit.

An artifact whose hub stayed unreachable at resolution resolves to its ``expectedDigest``
(``status.resolved.digestSource: Expected``) with no revision (docs/controllers.md, "The
anchor"), so the hub has nothing to serve it from. Such a digest can still come from a node that
holds it (node-to-node sync): the peer's stored manifest is bound to the digest like any other,
and its bytes to their hashes. ``NoCommit`` stands in for the hub as the last source behind the
peers: every call fails ``SourceUnavailable`` at once, without a request, so a peer dying
mid-file ends the attempt (its verified bytes kept for the next one) instead of asking the hub
for a commit it cannot name.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from hub import blocking, files
from hub import errors as hub_errors
from openapi import reasons

MESSAGE = ("it was resolved from its expected digest while the hub was unreachable, so only a "
           "node holding it can deliver it")


def refusal() -> hub_errors.HubError:
    return hub_errors.HubError(reasons.SOURCE_UNAVAILABLE, MESSAGE)


class NoCommit:
    """A ``hub.source.Source`` (and ``BlockingRanges``) that serves nothing."""

    @property
    def can_open_ranges(self) -> bool:
        return True  # the peers' ranges keep the fast path; this one refuses at once

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str:
        raise refusal()

    async def list_files(self, repo: str, commit: str, *, token: str | None
                         ) -> list[files.RemoteFile]:  # fmt: skip
        raise refusal()

    async def stream(self, repo: str, commit: str, path: str, *, start: int = 0,
                     end: int | None = None, token: str | None) -> AsyncGenerator[bytes, None]:
        raise refusal()
        yield b""  # an async generator, as the protocol's stream is

    def open_range(self, repo: str, commit: str, path: str, *, start: int, end: int,
                   token: str | None, read_timeout: float | None = None) -> blocking.RangeBody:
        raise refusal()
