"""Status writes with conflict retry.

Another writer may change the object between a controller's read and its write, so each write reads
the object fresh, applies its change to that copy and writes it with the resourceVersion it read; a
conflict reads again and reapplies. A change that leaves the status as it was writes nothing.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable

from controllers.runtime import client as clients
from controllers.runtime import errors
from openapi import wire

log = logging.getLogger(__name__)

ATTEMPTS = 5


class Gone(Exception):
    """The object was deleted (or its UID changed) before the status could be written."""


async def write(api: clients.Client, resource: clients.Resource, namespace: str, name: str,
                change: Callable[[wire.Obj], None], *, uid: str = "",
                first: wire.Obj | None = None) -> wire.Obj | None:
    """Apply ``change`` (it edits the status dict in place) and write; returns the written
    object, or None when nothing changed. ``first`` saves the first read (an informer's copy:
    if it is stale the write conflicts and the retry reads fresh)."""
    current = first
    for attempt in range(ATTEMPTS):
        if current is None:
            try:
                current = await api.get(resource, namespace, name)
            except errors.NotFound as exc:
                raise Gone(name) from exc
        if uid and (current.get("metadata") or {}).get("uid") != uid:
            raise Gone(name)
        before = current.get("status") or {}
        status = copy.deepcopy(before)
        change(status)
        if status == before:
            return None
        updated = dict(current)
        updated["status"] = status
        try:
            return await api.update_status(resource, updated)
        except errors.Conflict:
            log.debug("status of %s/%s changed meanwhile (attempt %d)", namespace, name,
                      attempt + 1)
            current = None
        except errors.NotFound as exc:
            raise Gone(name) from exc
    raise errors.Conflict(f"status of {namespace}/{name} kept changing; giving up for now")
