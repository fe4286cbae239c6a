"""Conditions as the controllers write them.

``lastTransitionTime`` moves when ``status`` changes, and also when ``reason`` changes: on
``Degraded`` the time is when the current failure was first seen, which the revalidation
staircase and the anchor fallback measure from.
"""

from __future__ import annotations

import datetime

from openapi import wire
from timing import clock as clocks

find = wire.condition
is_true = wire.is_true


def since(status: wire.Obj, kind: str) -> datetime.datetime | None:
    found = find(status, kind)
    return None if found is None else clocks.parse(found.get("lastTransitionTime"))


def put(status: wire.Obj, kind: str, state: str, reason: str, message: str, *,
        now: datetime.datetime, generation: int | None = None) -> None:
    """Set one condition in ``status`` (in place), keeping the others and their order."""
    conditions: list[wire.Obj] = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    old = find(status, kind)
    moved = old is None or old.get("status") != state or old.get("reason") != reason
    new: wire.Obj = {"type": kind, "status": state, "reason": reason, "message": message,
                "lastTransitionTime": clocks.rfc3339(now) if moved or old is None
                else old.get("lastTransitionTime") or clocks.rfc3339(now)}
    if generation is not None:
        new["observedGeneration"] = generation
    for index, condition in enumerate(conditions):
        if condition.get("type") == kind:
            conditions[index] = new
            break
    else:
        conditions.append(new)
    status["conditions"] = conditions
