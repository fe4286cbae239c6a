"""Wire objects: the one ``Obj``, the metav1 shapes every kind shares, and their generic readers.

``Obj`` is a JSON object not typed further: kube's Pods, Leases, Secrets and ConfigMaps, bodies in
transit, and our own objects while they travel through code that does not care about their kind.
Where code reads a field of one of our kinds it asks that kind's reader (``openapi.kinds``);
where it writes one it builds the view, which mypy checks against the schema's shape.

Runs on Python 3.10 (the installable client depends on it): required keys sit in a ``total=True``
base, optional ones in a ``total=False`` subclass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict

Obj = dict[str, Any]
"""A wire object not typed further (the only definition: ``tests/unit/openapi/test_wire_owners.py``
fails on a second)."""

Readable = Mapping[str, Any]
"""What a reader accepts: a view, or an ``Obj`` fresh from the wire."""

ConditionStatus = Literal["True", "False", "Unknown"]
TRUE: Literal["True"] = "True"
FALSE: Literal["False"] = "False"


class _OwnerReferenceRequired(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str


class OwnerReference(_OwnerReferenceRequired, total=False):
    controller: bool
    blockOwnerDeletion: bool


class ManagedFieldsEntry(TypedDict, total=False):
    apiVersion: str
    fieldsType: str
    fieldsV1: Obj
    manager: str
    operation: str
    subresource: str
    time: str


class ObjectMeta(TypedDict, total=False):
    """metav1.ObjectMeta, as every kind of the group carries it."""

    name: str
    generateName: str
    namespace: str
    selfLink: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]
    managedFields: list[ManagedFieldsEntry]


class Envelope(TypedDict, total=False):
    """What every object of the group carries besides its spec and status."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta


ListMeta = TypedDict("ListMeta", {"resourceVersion": str, "continue": str,
                                  "remainingItemCount": int}, total=False)
"""metav1.ListMeta (``continue`` is a Python keyword, hence the functional form)."""


class _ConditionRequired(TypedDict):
    type: str
    status: ConditionStatus


class Condition(_ConditionRequired, total=False):
    """metav1.Condition; each kind's module names the types it may hold (``CONDITIONS``)."""

    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


class VersionInfo(TypedDict, total=False):
    """``GET /version`` (apimachinery's version.Info): the server writes it, clients read it."""

    major: str
    minor: str
    emulationMajor: str
    emulationMinor: str
    minCompatibilityMajor: str
    minCompatibilityMinor: str
    gitVersion: str
    gitCommit: str
    gitTreeState: str
    buildDate: str
    goVersion: str
    compiler: str
    platform: str


def dig(obj: object, *path: str) -> object:
    """The value at ``path`` under ``obj``, or None where a step is missing or not an object."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def mapping(obj: object, *path: str) -> Readable:
    """The object at ``path`` under ``obj``; empty when it is missing or not an object."""
    found = dig(obj, *path)
    return found if isinstance(found, Mapping) else {}


def text(obj: object, *path: str) -> str:
    """The string at ``path``; ``""`` when it is missing or not a string."""
    found = dig(obj, *path)
    return found if isinstance(found, str) else ""


def integer(obj: object, *path: str) -> int | None:
    """The integer at ``path``; None when it is missing or not an integer (a bool is not one)."""
    found = dig(obj, *path)
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def items(obj: object, *path: str) -> list[Readable]:
    """The objects of the list at ``path``, skipping anything that is not an object."""
    found = dig(obj, *path)
    if not isinstance(found, list):
        return []
    return [item for item in found if isinstance(item, Mapping)]


def strings(obj: object, *path: str) -> list[str]:
    """The strings of the list at ``path``, skipping anything that is not a string."""
    found = dig(obj, *path)
    if not isinstance(found, list):
        return []
    return [item for item in found if isinstance(item, str)]


def text_at(*path: str) -> Callable[[object], str]:
    """A reader of the string at ``path`` (``""`` when missing): one field, one line."""
    return lambda obj: text(obj, *path)


def integer_at(*path: str) -> Callable[[object], int | None]:
    """A reader of the integer at ``path`` (None when missing)."""
    return lambda obj: integer(obj, *path)


def flag_at(*path: str) -> Callable[[object], bool]:
    """A reader of the boolean at ``path``: True only when it says true (the schemas' default is
    false)."""
    return lambda obj: dig(obj, *path) is True


def mapping_at(*path: str) -> Callable[[object], Readable]:
    """A reader of the object at ``path`` (empty when missing)."""
    return lambda obj: mapping(obj, *path)


def meta(obj: object) -> Readable:
    """``metadata``, or an empty mapping."""
    return mapping(obj, "metadata")


def key_of(obj: object) -> tuple[str, str]:
    """``(namespace, name)``; the namespace is empty for cluster objects."""
    return text(obj, "metadata", "namespace"), text(obj, "metadata", "name")


def condition(status: object, kind: str) -> Readable | None:
    """The condition of type ``kind`` in a ``status`` (not the object), or None."""
    for found in items(status, "conditions"):
        if found.get("type") == kind:
            return found
    return None


def is_true(status: object, kind: str) -> bool:
    """Whether the condition ``kind`` of a ``status`` says True."""
    found = condition(status, kind)
    return found is not None and found.get("status") == TRUE
