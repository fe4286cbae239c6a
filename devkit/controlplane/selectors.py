"""Label selectors (equality- and set-based) and field selectors, parsed as kube parses them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from devkit.controlplane import status
from devkit.controlplane.resources import Kind, field_value

_KEY = re.compile(
    r"^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_REQUIREMENT = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[^\s!=<>(),]+)\s*"
    r"(?:(?P<op>==|=|!=|<|>)\s*(?P<value>[^\s,()]*)|\s(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)

LabelMatcher = Callable[[Mapping[str, str]], bool]


def _split(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _bad_label(text: str) -> status.StatusError:
    return status.StatusError(
        status.bad_request(f"unable to parse requirement: found '{text[:64]}', expected: selector")
    )


def labels(text: str | None) -> LabelMatcher:
    """A matcher for a ``labelSelector`` query value (None or empty matches everything)."""
    if not text:
        return lambda _labels: True
    tests: list[LabelMatcher] = []
    for part in _split(text):
        match = _REQUIREMENT.match(part)
        if match is None or not _KEY.match(match["key"]):
            raise _bad_label(part)
        tests.append(_requirement(part, match))
    return lambda ls: all(test(ls) for test in tests)


def _requirement(part: str, match: re.Match[str]) -> LabelMatcher:
    key = match["key"]
    if match["neg"]:
        if match["op"] or match["set"]:
            raise _bad_label(part)
        return lambda ls: key not in ls
    if match["set"]:
        values = {v.strip() for v in match["values"].split(",") if v.strip()}
        if not all(_VALUE.match(v) for v in values):
            raise _bad_label(part)
        if match["set"] == "in":
            return lambda ls: ls.get(key) in values
        return lambda ls: ls.get(key) not in values
    if not match["op"]:
        return lambda ls: key in ls
    value, op = match["value"], match["op"]
    if op in ("<", ">"):
        if not value.isdigit():
            raise _bad_label(part)
        return _numeric(key, int(value), op)
    if not _VALUE.match(value):
        raise _bad_label(part)
    if op == "!=":
        return lambda ls: ls.get(key) != value
    return lambda ls: ls.get(key) == value


def _numeric(key: str, bound: int, op: str) -> LabelMatcher:
    def test(ls: Mapping[str, str]) -> bool:
        raw = ls.get(key)
        if raw is None or not raw.lstrip("-").isdigit():
            return False
        return int(raw) > bound if op == ">" else int(raw) < bound

    return test


@dataclasses.dataclass(frozen=True)
class FieldRequirement:
    field: str
    value: str
    equal: bool


@dataclasses.dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: dict[str, Any]) -> bool:
        return all(
            (field_value(obj, r.field) == r.value) == r.equal for r in self.requirements
        )

    def name(self) -> str:
        """The name a ``metadata.name=X`` requirement pins (authorization fills it in)."""
        for r in self.requirements:
            if r.field == "metadata.name" and r.equal:
                return r.value
        return ""


def fields(text: str | None, kind: Kind) -> FieldSelector:
    if not text:
        return FieldSelector()
    requirements = []
    for part in text.split(","):
        if not part.strip():
            continue
        for op, equal in (("!=", False), ("==", True), ("=", True)):
            if op in part:
                field, value = part.split(op, 1)
                positive = equal
                break
        else:
            shown = part[:64]
            raise status.StatusError(
                status.bad_request(f"invalid selector: '{shown}'; can't understand '{shown}'")
            )
        field = field.strip()
        if not kind.selectable(field):
            raise status.StatusError(
                status.bad_request(f'field label not supported: {field[:64]}')
            )
        requirements.append(FieldRequirement(field, value.strip(), positive))
    return FieldSelector(tuple(requirements))
