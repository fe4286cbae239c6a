"""The seam between mounting and materializing.

The CSI node service asks a ``Materializer`` to make a digest present; the answer says whether it is
published now, still arriving (with progress), or failed (with a reason and a retry time).
Implementations: a local-directory importer (tests, air-gapped seeding) and the hub downloader.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from nodeplugin.cache import check, layout
from openapi import reasons, sources, states

log = logging.getLogger(__name__)

SourceKind = sources.HubKind
Origin = states.Origin
"""Where an attempt's bytes came from (``status.models[].source``): most of them, by count."""


class State(enum.Enum):
    """The delivery states (``openapi.states.DELIVERY_STATES``)."""

    DOWNLOADING = states.DOWNLOADING
    PUBLISHED = states.PUBLISHED
    FAILED = states.FAILED


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
    origin: Origin = states.HUB


Check = check.Check
"""Which verification failed (``cache.check`` owns the vocabulary: the published trees' rule
lives there)."""


STOPPED = "Stopped"
"""The result of an attempt the plugin's shutdown ended (its partial files stay)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Completion:
    """The end of one attempt, told to every ``Materializer.add_done_callback`` callback."""

    digest: str
    result: str
    """``Published``, a failure ``Reason`` value, or ``STOPPED``."""
    seconds: float
    """From the attempt's start to its end (a monotonic clock)."""
    check: Check | None = None
    """For ``IntegrityMismatch``: which verification failed."""
    origin: Origin = states.HUB
    """Where most of the attempt's bytes came from."""

    @property
    def published(self) -> bool:
        return self.result == State.PUBLISHED.value


DoneCallback = Callable[[Completion], None]


class AttemptError(Exception):
    """Why an attempt ends without publishing (the downloader's ``attempt.Failed``, the local
    import's ``local.ImportFailure``).

    ``message`` says what the reason means plus a detail such as the hub's HTTP status: it goes
    into status and mount errors, so it names no repository, file or URL. ``detail`` is the full
    story for the plugin's log (paths, never a token or a signed URL).
    """

    def __init__(self, reason: Reason, message: str, detail: str = "", *,
                 check: Check | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.detail = detail or message
        self.check = check
        """Which verification failed, for ``IntegrityMismatch`` (the metrics count it)."""


class DoneCallbacks:
    """The callbacks of one materializer; one that raises is logged and the others still run."""

    def __init__(self) -> None:
        self._callbacks: list[DoneCallback] = []

    def add(self, callback: DoneCallback) -> None:
        self._callbacks.append(callback)

    def notify(self, completion: Completion) -> None:
        for callback in self._callbacks:
            try:
                callback(completion)
            except Exception:
                log.exception("a completion callback failed for %s", completion.digest)


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

    @property
    def downloaded_bytes(self) -> int:
        """Bytes received from a hub so far (a counter; 0 for a source that downloads none)."""
        ...

    def add_done_callback(self, callback: DoneCallback) -> None:
        """Call ``callback`` (on the event loop, quickly) each time an attempt ends."""
        ...

    async def close(self) -> None:
        """Stop every attempt, keeping partial files for a resume."""
        ...


def refuse_reserved(paths: Iterable[str], error: type[AttemptError]) -> None:
    """An ``INVALID_REQUEST`` ``error`` when a manifest path uses a name the cache reserves for
    its own files (``layout.RESERVED_NAMES``)."""
    reserved = layout.reserved_path(paths)
    if reserved is not None:
        raise error(Reason.INVALID_REQUEST, "the manifest uses a file name the cache reserves",
                    f"manifest path {reserved!r} uses a name the cache reserves")
