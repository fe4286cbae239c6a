"""The one error type of hub access, and the single place httpx exceptions are translated.

A ``HubError`` carries a reason from the API's failure vocabulary, the HTTP status when there was
one, how long the hub asked us to wait, and a message that is safe to show anywhere: it may name a
path and a status but never a token, an Authorization header or a signed URL's query string.
"""

from __future__ import annotations

import httpx

from openapi import reasons

Reason = reasons.HubReason
"""The hub's vocabulary (owned by ``openapi.reasons``: ``HUB_REASONS``)."""

NOT_ACCESSIBLE = "does not exist or is not accessible"


class HubError(Exception):
    """A hub refused, failed or could not be reached; ``message`` is safe to log and show."""

    def __init__(
        self,
        reason: Reason,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message
        self.status = status
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"HubError({self.reason!r}, {self.message!r}, status={self.status!r})"


def safe_url(url: httpx.URL | str) -> str:
    """The URL without its query string or user info: signed URLs keep their secrets there."""
    parsed = httpx.URL(str(url))
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


def from_transport(exc: httpx.HTTPError, what: str) -> HubError:
    """Translate an httpx transport failure (never a status) into ``SourceUnavailable``.

    ``what`` is a caller-built safe description (for example a repository path); httpx's own
    message is not used because it can embed the request URL with a signed query string.
    """
    kind = type(exc).__name__
    return HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: network error ({kind})")
