"""The NodeModelStore spec's settings as values: each default and bound read from the schema.

``schema.NODE_MODEL_STORE_SPEC`` is the one definition. The worker's settings
(``controllers/nodestores/settings.py``: its defaults and the ConfigMap's bounds), the node plugin's
start-up flags and the hub clients' default endpoints take them from here; the Helm chart, which
cannot import Python, is checked against them (``tests/unit/charts/test_settings_contract.py``
fails naming the setting that drifts).

It also owns the one rule between two settings: the low watermark is below the high one
(``watermarks_problem``), which admission, the node plugin's spec check and the worker's
ConfigMap merge all ask, and the chart's helper is checked against.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from openapi import fields, schema


@dataclasses.dataclass(frozen=True, slots=True)
class Bounded:
    """An integer field of the spec with both bounds: where it is, its default, its range."""

    path: str  # spec.watermarks.highPercent
    default: int
    minimum: int
    maximum: int


@dataclasses.dataclass(frozen=True, slots=True)
class AtLeast:
    """An integer field of the spec bounded below only."""

    path: str
    default: int
    minimum: int


@dataclasses.dataclass(frozen=True, slots=True)
class String:
    path: str
    default: str


Setting = Bounded | AtLeast | String


def _field(group: str, name: str) -> tuple[str, schema.Schema]:
    found: schema.Schema = schema.NODE_MODEL_STORE_SPEC["properties"][group]["properties"][name]
    return f"spec.{group}.{name}", found


def _bounded(group: str, name: str) -> Bounded:
    path, field = _field(group, name)
    return Bounded(path, field["default"], field["minimum"], field["maximum"])


def _at_least(group: str, name: str) -> AtLeast:
    path, field = _field(group, name)
    return AtLeast(path, field["default"], field["minimum"])


def _string(group: str, name: str) -> String:
    path, field = _field(group, name)
    return String(path, field["default"])


HIGH_PERCENT = _bounded("watermarks", "highPercent")
LOW_PERCENT = _bounded("watermarks", "lowPercent")
CONCURRENCY = _bounded("download", "concurrency")
BYTES_PER_SECOND = _at_least("download", "bytesPerSecond")
HUGGING_FACE_ENDPOINT = _string("hub", "huggingFaceEndpoint")
MODEL_SCOPE_ENDPOINT = _string("hub", "modelScopeEndpoint")

SETTINGS: tuple[Setting, ...] = (HIGH_PERCENT, LOW_PERCENT, CONCURRENCY, BYTES_PER_SECOND,
                                 HUGGING_FACE_ENDPOINT, MODEL_SCOPE_ENDPOINT)
"""Every field of ``spec.watermarks``, ``spec.download`` and ``spec.hub`` with a default."""


def watermarks_problem(high: int, low: int) -> str:
    """Why ``low`` cannot go with ``high`` (collection stops at low, starts above high); ``""``
    when it can. The one owner of the rule."""
    return "" if low < high else f"must be below highPercent ({high})"


def watermark_errors(obj: dict[str, Any]) -> list[fields.FieldError]:
    """The rule on a NodeModelStore (a mistyped field is the schema's to report)."""
    spec = obj.get("spec")
    marks = spec.get("watermarks") if isinstance(spec, dict) else None
    if not isinstance(marks, dict):
        return []
    high, low = marks.get("highPercent"), marks.get("lowPercent")
    if not (isinstance(high, int) and isinstance(low, int)):
        return []
    problem = watermarks_problem(high, low)
    return [fields.invalid(LOW_PERCENT.path, low, problem)] if problem else []
