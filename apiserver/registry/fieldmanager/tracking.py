"""Recording ``managedFields`` on every write a request makes, after the strategy prepared it.

The registry builds every resource's strategy as a ``Tracking`` (the shared strategy, recording
after each prepare), so that once it has set the server's fields, defaulted the object and kept
what the path may not change, the write's manager is recorded on exactly what will be stored:
an Update over the stored object, or the entries an apply computed. Who writes is the request's
business, so the endpoint says it for the writes it makes (``writing``); a write without a
writer (the embedded controllers' in-process client) keeps the stored entries as they are.

As kube-apiserver: entries a request sends replace the stored ones when they decode (so a client
may edit them), are ignored when they do not or when they come to a subresource, and
``[{}]`` (one empty entry) strips them all (``take_reset``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Any

from apiserver.registry import meta, strategy
from apiserver.registry.fieldmanager import managed


@dataclasses.dataclass(slots=True)
class Writer:
    manager: str
    subresource: str = ""
    apply: bool = False
    """The endpoint computed the entries (in the object it hands the store) by an apply."""
    reset: bool = False
    """The request sent ``managedFields: [{}]``: store none."""


_CURRENT: contextvars.ContextVar[Writer | None] = contextvars.ContextVar(
    "fieldmanager_writer", default=None)


@contextlib.contextmanager
def writing(writer: Writer) -> Iterator[Writer]:
    """Every store write inside this block records ``writer``."""
    token = _CURRENT.set(writer)
    try:
        yield writer
    finally:
        _CURRENT.reset(token)


def take_reset(obj: Any, writer: Writer) -> None:
    """Notice (and remove) kube's request to strip the entries: ``managedFields: [{}]``."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(metadata, dict) and metadata.get("managedFields") == [{}]:
        del metadata["managedFields"]
        writer.reset = True


def manager_of(field_manager: str, user_agent: str) -> str:
    """The request's ``fieldManager``, else kube's default: the User-Agent up to its first
    ``/``, printable characters only, at most 128 bytes."""
    if field_manager:
        return field_manager
    kept: list[str] = []
    size = 0
    for char in user_agent.split("/", 1)[0]:
        if not char.isprintable():
            continue
        size += len(char.encode())
        if size > 128:
            break
        kept.append(char)
    return "".join(kept)


class Tracking(strategy.Strategy):
    """The shared strategy, recording the writer after each prepare."""

    def prepare_for_create(self, obj: dict[str, Any], *, pruned: bool = False) -> None:
        given = obj.get("metadata", {}).get("managedFields")
        super().prepare_for_create(obj, pruned=pruned)
        self._record(given, {}, obj, "")

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any], *,
                           pruned: bool = False) -> None:
        given = new.get("metadata", {}).get("managedFields")
        super().prepare_for_update(new, old, pruned=pruned)
        self._record(given, old, new, "")

    def prepare_for_status_update(self, new: dict[str, Any], old: dict[str, Any], *,
                                  pruned: bool = False) -> dict[str, Any]:
        given = new.get("metadata", {}).get("managedFields")
        result = super().prepare_for_status_update(new, old, pruned=pruned)
        result["metadata"] = dict(result["metadata"])
        self._record(given, old, result, "status")
        return result

    def _record(self, given: Any, old: dict[str, Any], new: dict[str, Any],
                subresource: str) -> None:
        writer = _CURRENT.get()
        if writer is None:
            return  # in process: the stored entries stay (prepare kept them)
        metadata = new["metadata"]
        if writer.reset:
            metadata.pop("managedFields", None)
            return
        if writer.apply:
            entries = managed.decode_or_empty(given)
        else:
            entries = [] if subresource else managed.decode_or_empty(given)
            if not entries:
                entries = managed.decode_or_empty(old.get("metadata", {}).get("managedFields"))
            entries = managed.update(self.info.kind, entries, old, new, manager=writer.manager,
                                     subresource=subresource,
                                     api_version=self.info.group_version, now=meta.now())
        encoded = managed.encode(entries)
        if encoded:
            metadata["managedFields"] = encoded
        else:
            metadata.pop("managedFields", None)
