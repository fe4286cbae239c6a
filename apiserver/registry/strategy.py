"""Per-resource rules: server-managed fields on create and update, and the checks refusing a write.

Like kube's registry strategies: ``prepare_for_create`` clears status and sets generation 1,
``prepare_for_update`` keeps the stored status and bumps generation only on a spec change, the
status path keeps everything except ``status``. Checks return field errors the store turns into one
422.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openapi import admission, defaults, fields, objectmeta, pruning, resources, validation

# Metadata only the server writes; an update keeps the stored value.
_SERVER_METADATA = ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "generation", "uid", "managedFields", "selfLink")


ClusterVersion = Callable[[], "tuple[int, int] | None"]
"""The (major, minor) of the cluster workloads run on, None when it cannot be read."""


def floor_met() -> tuple[int, int] | None:
    """Standalone mode: no cluster whose Pods could lose an image volume (docs/api.md)."""
    return admission.IMAGE_VOLUME_FLOOR


class Strategy:
    """The rules every resource shares; subclasses add admission.

    ``cluster_version`` is what admission may ask of the cluster (the image-source floor)."""

    def __init__(self, info: resources.ResourceInfo, *,
                 cluster_version: ClusterVersion = floor_met) -> None:
        self.info = info
        self.cluster_version = cluster_version

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

    def check_create(self, obj: dict[str, Any]) -> list[fields.FieldError]:
        return self.admit_create(obj)

    def admit_create(self, obj: dict[str, Any]) -> list[fields.FieldError]:
        """Schema checks of a new object; a resource with admission rules adds them."""
        return validation.validate(self.info.kind, obj)

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
        problems = self._metadata_update_problems(new, old)
        problems.extend(self.admit_update(old, new))
        return problems

    def admit_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[fields.FieldError]:
        """Schema checks of a changed object; a resource with admission rules adds them."""
        return validation.validate(self.info.kind, new)

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

    def check_status_update(self, new: dict[str, Any]) -> list[fields.FieldError]:
        return validation.validate(self.info.kind, new)

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


class ModelArtifactStrategy(Strategy):
    """ModelArtifact: in-process admission (schema included); the spec is immutable; image
    sources are refused while the cluster is below the floor (asked at every create)."""

    def admit_create(self, obj: dict[str, Any]) -> list[fields.FieldError]:
        return admission.admit_create(obj, cluster_version=self.cluster_version())

    def admit_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[fields.FieldError]:
        return admission.admit_update(old, new)



# Kinds whose rules go beyond their schema; every other served kind gets the generic Strategy.
BY_KIND: dict[str, type[Strategy]] = {
    resources.MODEL_ARTIFACT.kind: ModelArtifactStrategy,
}


def for_resource(info: resources.ResourceInfo, *,
                 cluster_version: ClusterVersion = floor_met) -> Strategy:
    """The strategy of a served resource."""
    return BY_KIND.get(info.kind, Strategy)(info, cluster_version=cluster_version)
