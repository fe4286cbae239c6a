"""What a rule is given: the request (writers' stage), the prepared object (a Write), and who
asked for the write (``requester``, for the rules that authorize a change)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Sequence

from apiserver.auth import user as users
from openapi import fields, resources


@dataclasses.dataclass(frozen=True, slots=True)
class WriteRequest:
    """A write as the writers' stage sees it: after authorization, before its body is read."""

    info: resources.ResourceInfo
    subresource: str
    name: str
    user: users.UserInfo


def unrefused(found: Sequence[fields.FieldError],
              problems: list[fields.FieldError]) -> list[fields.FieldError]:
    """``problems`` less those on a field (or under one) an earlier rule refused already."""
    refused = {error.field for error in found}
    return [p for p in problems if not any(_covers(f, p.field) for f in refused)]


def _covers(refused: str, field: str) -> bool:
    return field == refused or field.startswith(refused + ".") or field.startswith(refused + "[")


_REQUESTER: contextvars.ContextVar[users.UserInfo | None] = contextvars.ContextVar(
    "admission_requester", default=None)


@contextlib.contextmanager
def requested_by(user: users.UserInfo) -> Iterator[None]:
    """Every store write inside this block is ``user``'s (the endpoints say it for the writes a
    request makes); rules that authorize a change (``Chain.authorize``) judge that user."""
    token = _REQUESTER.set(user)
    try:
        yield
    finally:
        _REQUESTER.reset(token)


def requester() -> users.UserInfo | None:
    """The user whose request makes the current write; None for the server's own writes."""
    return _REQUESTER.get()
