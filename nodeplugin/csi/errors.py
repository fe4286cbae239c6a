"""The one mapping from domain errors to gRPC status codes.

Every RPC handler runs inside ``translate``: a ``PluginError`` becomes its code with its message,
and any other exception becomes ``INTERNAL`` with a generic message (the detail goes to the log),
so nothing reaches kubelet as ``UNKNOWN``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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


@asynccontextmanager
async def translate(context: grpc.aio.ServicerContext, method: str) -> AsyncIterator[None]:
    """Turn whatever the body raises into a deliberate status on ``context``."""
    try:
        yield
    except errors.PluginError as err:
        code = code_of(err)
        level = logging.INFO if code != grpc.StatusCode.INTERNAL else logging.ERROR
        log.log(level, "%s: %s: %s", method, code.name, err.message)
        await context.abort(code, err.message)
    except grpc.aio.AbortError:
        raise
    except Exception:
        log.exception("%s: unexpected failure", method)
        await context.abort(
            grpc.StatusCode.INTERNAL, f"{method} failed unexpectedly; see the plugin's log"
        )
