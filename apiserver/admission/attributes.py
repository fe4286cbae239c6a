"""What a rule is given: the request (writers' stage) or the prepared object (a Write)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

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
