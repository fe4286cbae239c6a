"""One error model: every failure the API reports is a ``StatusError`` rendered as a ``Status``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypedDict

import orjson


class Cause(TypedDict, total=False):
    reason: str
    """kube's ``StatusCause.Type``, sent as ``reason`` (its JSON name)."""
    message: str
    field: str


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str
    uid: str
    causes: list[Cause]
    retryAfterSeconds: int


class StatusError(Exception):
    """A Kubernetes ``Status`` failure. Subclasses fix ``code`` and ``reason``."""

    code = 500
    reason = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        details: StatusDetails | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = dict(self.details)
        return body


class BadRequest(StatusError):
    code = 400
    reason = "BadRequest"


class Unauthorized(StatusError):
    code = 401
    reason = "Unauthorized"


class Forbidden(StatusError):
    code = 403
    reason = "Forbidden"


class NotFound(StatusError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(StatusError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(StatusError):
    code = 406
    reason = "NotAcceptable"


class AlreadyExists(StatusError):
    code = 409
    reason = "AlreadyExists"


class Conflict(StatusError):
    code = 409
    reason = "Conflict"


class Gone(StatusError):
    code = 410
    reason = "Expired"


class RequestEntityTooLarge(StatusError):
    code = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(StatusError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(StatusError):
    code = 422
    reason = "Invalid"


class TooManyRequests(StatusError):
    code = 429
    reason = "TooManyRequests"


class InternalError(StatusError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(StatusError):
    code = 503
    reason = "ServiceUnavailable"


class Timeout(StatusError):
    code = 504
    reason = "Timeout"


def encoded(err: StatusError) -> bytes:
    """The ``Status`` body of ``err`` as sent."""
    return orjson.dumps(err.body())


async def send(send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
               err: StatusError) -> None:
    """Answer with ``err``'s ``Status`` on a raw ASGI ``send``: the one writer for answers made
    before a route runs (middleware); routes raise and the app's handler uses ``encoded``."""
    body = encoded(err)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
