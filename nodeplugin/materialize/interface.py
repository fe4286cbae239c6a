"""The seam between mounting and materializing.

The CSI node service asks a ``Materializer`` to make a digest present; the answer says whether it is
published now, still arriving (with progress), or failed (with a reason and a retry time).
Implementations: a local-directory importer (tests, air-gapped seeding) and the hub downloader.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Literal, Protocol

from openapi import reasons

SourceKind = Literal["huggingFace", "modelScope"]


class State(enum.Enum):
    DOWNLOADING = "Downloading"
    PUBLISHED = "Published"
    FAILED = "Failed"


Reason = reasons.FailureReason
"""Failure reasons of an attempt (owned by ``openapi.reasons``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """What to fetch, taken from the authorized artifact (never from the mount's hints)."""

    kind: SourceKind
    repository: str
    revision: str
    """The resolved commit (``status.resolved.revision``)."""
    allow_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    digest: str
    """``sha256:<64 hex>``: the manifest digest the artifact resolved to."""
    source: Source
    token: str | None = dataclasses.field(default=None, repr=False)
    """The mount's credential (nodePublishSecretRef key ``token``); memory only, never logged."""


@dataclasses.dataclass(frozen=True, slots=True)
class Progress:
    digest: str
    state: State
    received_bytes: int = 0
    total_bytes: int | None = None
    """Known once the manifest has been listed."""
    reason: Reason | None = None
    message: str = ""
    """Operator-facing; never carries a token, a signed URL or a tenant name."""
    retry_time: datetime.datetime | None = None


class Materializer(Protocol):
    async def ensure(self, request: Request) -> Progress:
        """Start or join the single attempt for ``request.digest`` and return at once.

        ``PUBLISHED`` means the tree is under ``objects/`` now. ``DOWNLOADING`` carries the
        attempt's progress. ``FAILED`` carries the reason and, when it backs off, ``retry_time``;
        until then calls return the same failure without starting anything.
        """
        ...

    def running(self) -> list[Progress]:
        """The attempts in progress (for status reports and ``GET /model/downloads``)."""
        ...

    async def close(self) -> None:
        """Stop every attempt, keeping partial files for a resume."""
        ...
