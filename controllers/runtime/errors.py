"""The errors a ``client.Client`` raises, whatever carries the request (registry or HTTP).

Each client translates its own failures into these once, at its boundary; controllers catch only
these. Messages are safe to log: they never carry a token.
"""

from __future__ import annotations


class ApiError(Exception):
    """The API refused or failed a request; ``code`` is the HTTP status it answered."""

    code = 500

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class NotFound(ApiError):
    code = 404


class Conflict(ApiError):
    """The object changed since it was read (or already exists): read again, then retry."""

    code = 409


class Expired(ApiError):
    """The resourceVersion a watch started from is gone (410): list again."""

    code = 410


class TooLarge(ApiError):
    """The resourceVersion asked for is newer than the server's store (504 "Too large resource
    version": its store went back, or it lags): list again."""

    code = 504


class Forbidden(ApiError):
    code = 403


def from_status(code: int, message: str) -> ApiError:
    """The error for an HTTP status code and a ``Status`` message."""
    if code == 504 and "Too large resource version" in message:
        return TooLarge(message, code=code)
    kinds: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Expired, 403: Forbidden}
    kind = kinds.get(code, ApiError)
    return kind(message, code=code)
