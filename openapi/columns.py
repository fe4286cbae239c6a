"""Printer columns of ``kubectl get`` for each kind, and the cells of one object's row."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, TypedDict

from openapi import reasons, sources, states
from timing import clock as clocks


class ColumnDefinition(TypedDict):
    name: str
    type: str
    format: str
    description: str
    priority: int


Cell = Callable[[dict[str, Any], datetime.datetime], Any]


def _column(name: str, kind: str, description: str, *, fmt: str = "",
            priority: int = 0) -> ColumnDefinition:
    return {"name": name, "type": kind, "format": fmt, "description": description,
            "priority": priority}


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _condition(obj: dict[str, Any], kind: str) -> Any:
    for condition in _get(obj, "status", "conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition.get("status")
    return None


_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_YEAR = 365 * _DAY
_STEPS = (
    # (below this many seconds, the unit, its letter, the next smaller unit shown or 0, its letter)
    (2 * _MINUTE, 1, "s", 0, ""),
    (10 * _MINUTE, _MINUTE, "m", 1, "s"),
    (3 * _HOUR, _MINUTE, "m", 0, ""),
    (8 * _HOUR, _HOUR, "h", _MINUTE, "m"),
    (48 * _HOUR, _HOUR, "h", 0, ""),
    (8 * _DAY, _DAY, "d", _HOUR, "h"),
    (2 * _YEAR, _DAY, "d", 0, ""),
    (8 * _YEAR, _YEAR, "y", _DAY, "d"),
)


def human_duration(seconds: float) -> str:
    """kubectl's rendering of an age: 45s, 3m20s, 12m, 5h4m, 20h, 3d4h, 30d, 2y10d, 9y."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    for below, unit, letter, smaller, smaller_letter in _STEPS:
        if whole < below:
            rest = (whole % unit) // smaller if smaller else 0
            return f"{whole // unit}{letter}" + (f"{rest}{smaller_letter}" if rest else "")
    return f"{whole // _YEAR}y"


def _age(obj: dict[str, Any], now: datetime.datetime) -> str:
    created = clocks.parse(_get(obj, "metadata", "creationTimestamp"))
    if created is None:
        return "<unknown>"
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.UTC)
    return human_duration((now - created).total_seconds())


def human_size(size: Any) -> str | None:
    """``size_text`` of a byte count, or None when ``size`` is not one (the cell is then
    ``<none>``)."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    return size_text(size)


def size_text(count: int) -> str:
    """Bytes in binary units with one decimal (``953.7MiB``, ``512B``): the one byte formatter,
    also used by the node plugin's progress messages so a mount's event and ``kubectl get``
    spell sizes alike."""
    if count < 1024:
        return f"{count}B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f}{unit}"
    return f"{value / 1024:.1f}PiB"


def _artifact_source(obj: dict[str, Any], now: datetime.datetime) -> Any:
    source = _get(obj, "spec", "source") or {}
    for hub in sources.HUB_KINDS:
        repository = _get(source, hub, "repository")
        if repository:
            return repository
    claim = _get(source, sources.CLAIM, "claimName")
    if claim:
        return f"claim/{claim}"
    return _get(source, sources.IMAGE, "reference")


def _artifact_revision(obj: dict[str, Any], now: datetime.datetime) -> Any:
    revision = _get(obj, "status", "resolved", "revision")
    return revision[:12] if isinstance(revision, str) and revision else None


def _artifact_downloading(obj: dict[str, Any], now: datetime.datetime) -> Any:
    downloading = _get(obj, "status", "nodes", "downloading")
    percent = _get(obj, "status", "nodes", "downloadingPercent")
    if isinstance(downloading, int) and downloading and isinstance(percent, int):
        return f"{downloading} ({percent}%)"
    return None if downloading is None else str(downloading)


def _store_used(obj: dict[str, Any], now: datetime.datetime) -> Any:
    used = _get(obj, "status", "capacity", "usedPercent")
    return f"{used}%" if isinstance(used, int) else None


def _store_models(obj: dict[str, Any], now: datetime.datetime) -> Any:
    models = _get(obj, "status", "models")
    return len(models) if isinstance(models, list) else 0


def _store_downloading(obj: dict[str, Any], now: datetime.datetime) -> Any:
    models = _get(obj, "status", "models")
    if not isinstance(models, list):
        return 0
    return sum(1 for m in models if isinstance(m, dict) and m.get("state") == states.DOWNLOADING)


def _prefetch_ready(obj: dict[str, Any], now: datetime.datetime) -> Any:
    ready, desired = _get(obj, "status", "readyNodes"), _get(obj, "status", "desiredNodes")
    if not isinstance(ready, int) or not isinstance(desired, int):
        return None
    return f"{ready}/{desired}"


def _prefetch_pinned(obj: dict[str, Any], now: datetime.datetime) -> Any:
    pinned = _get(obj, "spec", "retention", "pinned")
    return pinned if isinstance(pinned, bool) else None


# --- cache governance (issue 39) ---
def _selector(obj: dict[str, Any], now: datetime.datetime) -> Any:
    found = _get(obj, "spec", "nodeSelector")
    if not isinstance(found, dict):
        return None
    return ",".join(f"{key}={value}" for key, value in sorted(found.items())) or "<all>"


def _binding_stores(obj: dict[str, Any], now: datetime.datetime) -> Any:
    refs = _get(obj, "spec", "storeRefs")
    if not isinstance(refs, list):
        return None
    return ",".join(str(ref.get("name")) for ref in refs if isinstance(ref, dict))


def _binding_quota(obj: dict[str, Any], now: datetime.datetime) -> Any:
    return human_size(_get(obj, "spec", "quota", "bytes"))


def _binding_used(obj: dict[str, Any], now: datetime.datetime) -> Any:
    return human_size(_get(obj, "status", "usedBytes"))
# --- end cache governance ---


_NAME = (_column("Name", "string", "The object's name.", fmt="name"),
         lambda obj, now: _get(obj, "metadata", "name"))
_AGE = (_column("Age", "date", "Time since the object was created.", priority=1), _age)


def _condition_column(kind: str) -> tuple[ColumnDefinition, Cell]:
    """The status of the condition ``kind``, in a column named after it."""
    return (_column(kind, "string", f"Status of the {kind} condition."),
            lambda obj, now: _condition(obj, kind))


_TABLES: dict[str, list[tuple[ColumnDefinition, Cell]]] = {
    "ModelArtifact": [
        _NAME,
        (_column("Source", "string", "The repository, claim/<name> or the image reference."),
         _artifact_source),
        (_column("Revision", "string", "The resolved commit, first 12 characters."),
         _artifact_revision),
        (_column("Size", "string", "Total size of the resolved manifest."),
         lambda obj, now: human_size(_get(obj, "status", "resolved", "sizeBytes"))),
        (_column(states.READY, "integer", "Nodes holding the content."),
         lambda obj, now: _get(obj, "status", "nodes", "ready")),
        (_column(states.DOWNLOADING, "string",
                 "Nodes downloading it, with their mean progress."),
         _artifact_downloading),
        _condition_column(reasons.RESOLVED),
        _AGE,
    ],
    "NodeModelStore": [
        _NAME,
        _condition_column(reasons.READY),
        (_column("Used", "string", "Usage of the cache filesystem."), _store_used),
        (_column("Models", "integer", "Entries in status.models."), _store_models),
        (_column(states.DOWNLOADING, "integer", "Entries being downloaded."), _store_downloading),
        _AGE,
    ],
    "ModelPrefetch": [
        _NAME,
        (_column("Artifact", "string", "The ModelArtifact it warms."),
         lambda obj, now: _get(obj, "spec", "artifactRef", "name")),
        (_column(states.READY, "string", "Ready target nodes out of the target nodes."),
         _prefetch_ready),
        (_column(states.DOWNLOADING, "integer", "Target nodes downloading."),
         lambda obj, now: _get(obj, "status", "downloadingNodes")),
        (_column("Pinned", "boolean", "Whether the digest is pinned on the target nodes."),
         _prefetch_pinned),
        _condition_column(reasons.AVAILABLE),
        _AGE,
    ],
    # --- cache governance (issue 39) ---
    "ModelStore": [
        _NAME,
        (_column("Selector", "string", "The pool's node selector."), _selector),
        (_column("Nodes", "integer", "Nodes with the plugin this store wins."),
         lambda obj, now: _get(obj, "status", "nodes")),
        _condition_column(reasons.SELECTOR_OVERLAP),
        _AGE,
    ],
    "ModelStoreBinding": [
        _NAME,
        (_column("Stores", "string", "The ModelStores granted."), _binding_stores),
        (_column("Quota", "string", "The byte budget."), _binding_quota),
        (_column("Used", "string", "The measured footprint; blank while not measured."),
         _binding_used),
        (_column("Pinned", "boolean", "Whether the namespace may pin."),
         lambda obj, now: _get(obj, "spec", "allowPinned")),
        _condition_column(reasons.OVER_QUOTA),
        _AGE,
    ],
}


# A kind without its own columns gets these, like a CRD without additionalPrinterColumns.
_DEFAULT = [_NAME, _AGE]


def columns(kind: str) -> list[ColumnDefinition]:
    """The column definitions of ``kind``; Age has priority 1, so it shows only with -o wide."""
    return [definition.copy() for definition, _ in _TABLES.get(kind, _DEFAULT)]


def cells(kind: str, obj: dict[str, Any], now: datetime.datetime) -> list[Any]:
    """One row for ``obj``; None where a value is unknown (kubectl leaves the cell blank, as
    for a custom resource's missing column)."""
    return [cell(obj, now) for _, cell in _TABLES.get(kind, _DEFAULT)]
