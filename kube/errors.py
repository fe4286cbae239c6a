"""The few typed errors every caller of kube-apiserver sees, whatever lightkube or httpx2 raised.

An answer with a Kubernetes ``Status`` keeps its code, reason and message (bounded in length);
a transport failure (refused, reset, timeout, TLS) becomes ``ConnectionFailed``. No message ever
carries a request header, so a bearer token cannot leak through an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2
from lightkube.core.exceptions import ApiError

MESSAGE_LIMIT = 1024

# Reason phrases kube uses when a body carries none (apimachinery's reasonForError).
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _bounded(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."


class KubeError(Exception):
    """kube-apiserver (or the way to it) refused a request.

    ``code`` is the HTTP status (0 when no answer arrived), ``reason`` kube's reason word,
    ``message`` its text and ``status`` the Status body as received (``{}`` without one).
    """

    def __init__(
        self, code: int, reason: str, message: str, status: Mapping[str, Any] | None = None
    ) -> None:
        self.code = code
        self.reason = reason
        self.message = _bounded(message)
        self.status: dict[str, Any] = dict(status or {})
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    @property
    def details(self) -> dict[str, Any]:
        details = self.status.get("details")
        return details if isinstance(details, dict) else {}


class BadRequest(KubeError):
    """400: the request itself is malformed (bad selector, bad body)."""


class Unauthorized(KubeError):
    """401: the credential was not accepted."""


class Forbidden(KubeError):
    """403: authenticated, but RBAC (or admission) said no."""


class NotFound(KubeError):
    """404: no such object (or path)."""


class Conflict(KubeError):
    """409 Conflict: a stale resourceVersion or a failed precondition; re-read and retry."""


class AlreadyExists(KubeError):
    """409 AlreadyExists: create of a name that is taken."""


class Expired(KubeError):
    """410: the resourceVersion asked for is compacted; re-list."""


class Invalid(KubeError):
    """422: the object failed validation."""


class ServerError(KubeError):
    """5xx or 429: the server could not answer now; retrying later may work."""


class TooLargeResourceVersion(ServerError):
    """504 ``ResourceVersionTooLarge``: the server has not reached the resourceVersion asked for
    (it lags, or its store went back): list again, without a version, and rebuild from that."""


TOO_LARGE_CAUSE = "ResourceVersionTooLarge"
"""The cause kube-apiserver gives a read from a resourceVersion it has not reached."""


def _too_large(code: int, status: Mapping[str, Any], message: str) -> bool:
    """client-go's test: a 504 naming the cause, or (older servers) saying so in the message."""
    if code != 504:
        return False
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    for cause in causes if isinstance(causes, list) else []:
        if isinstance(cause, dict) and cause.get("reason") == TOO_LARGE_CAUSE:
            return True
    return "Too large resource version" in message


class ConnectionFailed(KubeError):
    """No answer: connection refused or reset, a timeout, or a TLS failure."""


class TLSError(ConnectionFailed):
    """The TLS handshake failed (an untrusted server certificate, a refused client one)."""


class CredentialError(KubeError):
    """The client could not produce its own credential (token file, exec plugin)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "CredentialError", message)


class Undecodable(KubeError):
    """The answer arrived but its object does not fit the client's model; the message names the
    object and the failing field, never the object's content."""


class ConfigError(Exception):
    """A kubeconfig or in-cluster environment that cannot be used."""


def _class_for(code: int, reason: str) -> type[KubeError]:
    if code == 409:
        return AlreadyExists if reason == "AlreadyExists" else Conflict
    by_code: dict[int, type[KubeError]] = {
        400: BadRequest,
        401: Unauthorized,
        403: Forbidden,
        404: NotFound,
        410: Expired,
        422: Invalid,
        429: ServerError,
    }
    if code in by_code:
        return by_code[code]
    return ServerError if code >= 500 else KubeError


def from_status(status: Mapping[str, Any], http_code: int = 0) -> KubeError:
    """The typed error for a Status body (``http_code`` when the body lacks ``code``)."""
    raw_code = status.get("code")
    code = raw_code if isinstance(raw_code, int) and raw_code > 0 else http_code
    reason = status.get("reason")
    if not isinstance(reason, str) or not reason:
        reason = _REASONS.get(code, "Unknown")
    message = status.get("message")
    text = message if isinstance(message, str) else ""
    if _too_large(code, status, text):
        return TooLargeResourceVersion(code, reason, text, status)
    return _class_for(code, reason)(code, reason, text, status)


def from_response(response: httpx2.Response) -> KubeError:
    """The typed error for a non-2xx answer, from its Status body when it has one."""
    body: Any = None
    if "json" in response.headers.get("content-type", ""):
        try:
            body = response.json()
        except ValueError:
            body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return from_status(body, response.status_code)
    code = response.status_code
    reason = _REASONS.get(code, "Unknown")
    try:
        text = response.text.strip()
    except (httpx2.ResponseNotRead, UnicodeDecodeError):
        text = ""
    return _class_for(code, reason)(code, reason, text or reason)


def translate(exc: BaseException) -> KubeError | None:
    """The typed error for what lightkube or httpx2 raised, or None if it is neither's."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiError):
        try:
            body = exc.response.json() if exc.response is not None else exc.status.to_dict()
        except (ValueError, RuntimeError, httpx2.ResponseNotRead):
            body = exc.status.to_dict()
        http_code = exc.response.status_code if exc.response is not None else 0
        return from_status(body, http_code)
    if isinstance(exc, httpx2.HTTPStatusError):
        return from_response(exc.response)
    if isinstance(exc, httpx2.TimeoutException):
        return ConnectionFailed(0, "Timeout", f"no answer in time ({type(exc).__name__})")
    if isinstance(exc, httpx2.TransportError):
        return _transport(exc)
    return None


def _transport(exc: httpx2.TransportError) -> KubeError:
    text = str(exc)
    cause: BaseException | None = exc
    while cause is not None:
        if "SSL" in type(cause).__name__ or "CERTIFICATE" in str(cause).upper():
            return TLSError(0, "TLSError", f"TLS handshake failed: {_bounded(str(cause))}")
        cause = cause.__cause__ or cause.__context__
    return ConnectionFailed(0, "ConnectionFailed", f"{type(exc).__name__}: {text}")
