"""The one mapping from domain errors to gRPC status codes.

Every RPC handler runs inside ``Translate``: a ``PluginError`` becomes its code with its message,
and any other exception becomes ``INTERNAL`` with a generic message (the detail goes to the log),
so nothing reaches kubelet as ``UNKNOWN``.
"""

from __future__ import annotations

import logging
from types import TracebackType

import grpc

from nodeplugin import errors

log = logging.getLogger(__name__)

CODES: dict[type[errors.PluginError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.Aborted: grpc.StatusCode.ABORTED,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Internal: grpc.StatusCode.INTERNAL,
}


def code_of(err: errors.PluginError) -> grpc.StatusCode:
    for cls in type(err).__mro__:
        code = CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


class Translate:
    """Turn whatever the body raises into a deliberate status on ``context``.

    A class, not an ``asynccontextmanager`` generator: every RPC enters one, and a generator-based
    context manager costs several times as much."""

    __slots__ = ("_context", "_method")

    def __init__(self, context: grpc.aio.ServicerContext, method: str) -> None:
        self._context = context
        self._method = method

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if exc is None or isinstance(exc, grpc.aio.AbortError) or not isinstance(exc, Exception):
            return False  # done, aborted already, or cancelled: as it is
        if isinstance(exc, errors.PluginError):
            code = code_of(exc)
            level = logging.INFO if code != grpc.StatusCode.INTERNAL else logging.ERROR
            log.log(level, "%s: %s: %s", self._method, code.name, exc.message)
            await self._context.abort(code, exc.message)
        else:
            log.error("%s: unexpected failure", self._method, exc_info=exc)
            await self._context.abort(
                grpc.StatusCode.INTERNAL,
                f"{self._method} failed unexpectedly; see the plugin's log",
            )
        return False  # abort raised; never reached
