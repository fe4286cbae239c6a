"""Label selectors (full set-based syntax) and the metadata.name/namespace field selector."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from apiserver import errors
from openapi import fields, names

FIELD_KEYS = ("metadata.name", "metadata.namespace")

_SET = re.compile(r"^(?P<key>[^\s!=<>(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_COMPARE = re.compile(r"^(?P<key>[^\s!=<>(),]+)\s*(?P<op>==|=|!=|>|<)\s*(?P<value>[^\s!=<>(),]*)$")
_KEY = re.compile(r"^[^\s!=<>(),]+$")


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str
    """One of ``=``, ``!=``, ``in``, ``notin``, ``exists``, ``!``, ``>``, ``<``."""
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        # ``>`` and ``<`` compare 64-bit integers; a label that is not one never matches.
        have = as_int64(value) if value is not None else None
        if have is None:
            return False
        limit = int(self.values[0])
        return have > limit if self.op == ">" else have < limit


@dataclasses.dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req.matches(labels) for req in self.requirements)


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[tuple[str, str, str], ...] = ()
    """``(field, op, value)`` with op ``=`` or ``!=``."""

    @property
    def empty(self) -> bool:
        return not self.requirements

    def named(self) -> str:
        """The name a ``metadata.name=`` requirement pins (``""``: none)."""
        return next((value for field, op, value in self.requirements
                     if field == "metadata.name" and op == "="), "")

    def matches(self, namespace: str, name: str) -> bool:
        for field, op, value in self.requirements:
            have = name if field == "metadata.name" else namespace
            if (have == value) != (op == "="):
                return False
        return True


EVERYTHING = LabelSelector()
ANY_FIELD = FieldSelector()


def _split_top_level(text: str) -> list[str]:
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
    return parts


_INT64 = re.compile(r"-?[0-9]{1,19}")


def as_int64(value: str) -> int | None:
    """``value`` as a 64-bit integer written in ASCII digits (strconv.ParseInt's rule), or None."""
    if not _INT64.fullmatch(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


def _bad(text: str, why: str) -> errors.BadRequest:
    return errors.BadRequest(f"unable to parse requirement: {why} (in {fields.render(text)})")


def _check_key(key: str, text: str) -> None:
    problems = names.qualified_name_problems(key)
    if problems:
        raise _bad(text, f"invalid label key {fields.render(key)}: {problems[0]}")


def _check_value(value: str, text: str) -> None:
    problems = names.label_value_problems(value)
    if problems:
        raise _bad(text, f"invalid label value: {fields.render(value)}: {problems[0]}")


def parse_labels(text: str) -> LabelSelector:
    """Parse ``labelSelector``; BadRequest (400) on a syntax error."""
    if not text.strip():
        return LabelSelector()
    requirements = []
    for part in _split_top_level(text):
        item = part.strip()
        if not item:
            raise _bad(text, "found '', expected: identifier")
        if item.startswith("!"):
            key = item[1:].strip()
            if not _KEY.match(key):
                raise _bad(text, f"found {fields.render(key)}, expected: identifier")
            _check_key(key, text)
            requirements.append(Requirement(key, "!"))
            continue
        match = _SET.match(item)
        if match:
            values = tuple(v.strip() for v in match["values"].split(","))
            for value in values:
                _check_value(value, text)
            _check_key(match["key"], text)
            requirements.append(Requirement(match["key"], match["op"], values))
            continue
        match = _COMPARE.match(item)
        if match:
            op = "=" if match["op"] == "==" else match["op"]
            value = match["value"]
            _check_key(match["key"], text)
            if op in (">", "<"):
                if as_int64(value) is None:
                    raise _bad(text, f"for '{op}' operator, the value must be an integer")
            else:
                _check_value(value, text)
            requirements.append(Requirement(match["key"], op, (value,)))
            continue
        if _KEY.match(item):
            _check_key(item, text)
            requirements.append(Requirement(item, "exists"))
            continue
        raise _bad(text, f"found {fields.render(item)}, expected: a requirement")
    return LabelSelector(tuple(requirements))


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``(field, op, value)`` at the first operator, in one pass (a backtracking regex here was
    quadratic in the length of the selector)."""
    for index in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, index):
                field = term[:index].strip()
                return (field, op, term[index + len(op):]) if field else None
    return None


def parse_fields(text: str) -> FieldSelector:
    """Parse ``fieldSelector``; only metadata.name and metadata.namespace are known fields."""
    if not text.strip():
        return FieldSelector()
    requirements = []
    for part in re.split(r"(?<!\\),", text):
        split = _split_term(part)
        if split is None:
            raise errors.BadRequest(f"invalid selector: {fields.render(text)}; can't understand"
                                    f" {fields.render(part)}")
        field, op, value = split
        if field not in FIELD_KEYS:
            raise errors.BadRequest(
                f'{fields.render(field)} is not a known field selector: only "metadata.name", '
                '"metadata.namespace"'
            )
        requirements.append((field, "!=" if op == "!=" else "=", _unescape(value.strip())))
    return FieldSelector(tuple(requirements))
