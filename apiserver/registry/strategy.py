"""The rules every resource shares: server-managed fields on create and update, the metadata
checks, and the seam through which the store asks admission about the object.

Like kube's registry strategies: ``prepare_for_create`` clears status and sets generation 1,
``prepare_for_update`` keeps the stored status and bumps generation only on a spec change, the
status path keeps everything except ``status``. The strategy is the same for every resource;
what a kind adds (its schema, its admission rules) is ``apiserver.admission``'s, which the store
calls through ``Admission`` after the strategy prepared the object. Checks return field errors
the store turns into one 422.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Protocol

from openapi import defaults, fields, objectmeta, pruning, resources

# Metadata only the server writes; an update keeps the stored value.
_SERVER_METADATA = ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "generation", "uid", "managedFields", "selfLink")

Operation = Literal["CREATE", "UPDATE"]


@dataclasses.dataclass(frozen=True, slots=True)
class Write:
    """One write as admission sees it, after the strategy prepared ``obj``."""

    operation: Operation
    info: resources.ResourceInfo
    obj: dict[str, Any]
    old: dict[str, Any] | None = None
    """The stored object (an update)."""
    subresource: str = ""
    """``""`` for the main resource, ``"status"`` for the status path."""


class Admission(Protocol):
    """What the store asks of admission (``apiserver.admission.chain.Chain``)."""

    def admit(self, write: Write) -> list[fields.FieldError]:
        """Mutate ``write.obj``, then every way it is refused (empty: admitted)."""
        ...

    async def authorize(self, write: Write) -> None:
        """After ``admit`` admitted it: raise a ``StatusError`` (403) when the requester may
        not make this change (it may record what it allowed in ``write.obj``)."""
        ...


class Strategy:
    """The rules every resource shares."""

    def __init__(self, info: resources.ResourceInfo) -> None:
        self.info = info

    # create ------------------------------------------------------------------------------

    def prepare_for_create(self, obj: dict[str, Any], *, pruned: bool = False) -> None:
        """``pruned``: unknown fields are already gone (the endpoint pruned the request body)."""
        obj.pop("status", None)
        metadata = obj["metadata"]
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields",
                    "selfLink"):
            metadata.pop(key, None)
        metadata["generation"] = 1
        self.normalize(obj, pruned=pruned)

    def check_metadata(self, metadata: Any) -> list[fields.FieldError]:
        """ObjectMeta as sent (types, names, labels, annotations, finalizers, owners, managed
        fields); the store runs it first on every write, before anything reads the metadata."""
        return objectmeta.validate(metadata)

    # update of the main resource ------------------------------------------------------------

    def prepare_for_update(self, new: dict[str, Any], old: dict[str, Any], *,
                           pruned: bool = False) -> None:
        """Keep server-owned metadata and the stored status; bump generation on a spec change.

        ``pruned``: ``new`` has no unknown fields (the endpoint pruned it; the stored parts
        copied in were pruned when written)."""
        new_meta, old_meta = new["metadata"], old["metadata"]
        for key in _SERVER_METADATA:
            if key == "uid" and new_meta.get("uid") not in (None, "", old_meta.get("uid")):
                continue  # left in place so check_update reports the immutable field
            if key in old_meta:
                new_meta[key] = old_meta[key]
            else:
                new_meta.pop(key, None)
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
        self.normalize(new, pruned=pruned)
        if new.get("spec") != old.get("spec"):
            new_meta["generation"] = int(old_meta.get("generation") or 0) + 1

    def check_update(self, new: dict[str, Any], old: dict[str, Any]) -> list[fields.FieldError]:
        """The metadata rules of an update (the immutable uid, no finalizer added while the
        object is being deleted); the object's own rules are admission's."""
        return self._metadata_update_problems(new, old)

    # the status path --------------------------------------------------------------------------

    def prepare_for_status_update(self, new: dict[str, Any], old: dict[str, Any], *,
                                  pruned: bool = False) -> dict[str, Any]:
        """The stored object with only ``status`` taken from ``new`` (``pruned``: ``new`` has
        no unknown fields already)."""
        result = dict(old)
        result["metadata"] = dict(old["metadata"])
        if new.get("status") is None:
            result.pop("status", None)
        else:
            result["status"] = new["status"]
        if not pruned:
            pruning.prune(self.info.kind, result)
        return result

    # shared -----------------------------------------------------------------------------------

    def normalize(self, obj: dict[str, Any], *, pruned: bool = False) -> None:
        """Defaults and pruning, so in-process writers get the same object an HTTP client does.

        ``pruned``: the caller already pruned ``obj``, and pruning before defaulting gives the
        same object (defaults only fill known fields, with non-null values), so one schema walk
        is saved per request."""
        defaults.apply_defaults(self.info.kind, obj)
        if not pruned:
            pruning.prune(self.info.kind, obj)

    def _metadata_update_problems(
        self, new: dict[str, Any], old: dict[str, Any]
    ) -> list[fields.FieldError]:
        new_meta, old_meta = new["metadata"], old["metadata"]
        problems: list[fields.FieldError] = []
        if new_meta.get("uid") != old_meta.get("uid"):
            problems.append(fields.invalid("metadata.uid", new_meta.get("uid"),
                                           "field is immutable"))
        if old_meta.get("deletionTimestamp"):
            before = set(old_meta.get("finalizers") or [])
            added = [f for f in new_meta.get("finalizers") or [] if f not in before]
            if added:
                problems.append(fields.forbidden(
                    "metadata.finalizers",
                    f"no new finalizers can be added if the object is being deleted, found new"
                    f" finalizers {fields.render(added)}",
                ))
        return problems
