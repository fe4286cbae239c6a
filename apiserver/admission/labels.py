"""The label grammar of a node selector, for every rule that admits one (a prefetch's target
set, a ModelStore's pool)."""

from __future__ import annotations

from typing import Any

from openapi import fields, names

SUBDOMAIN_RULE = (
    "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending "
    "with a letter or digit, at most 253 characters"
)


def selector_problems(path: str, selector: Any) -> list[fields.FieldError]:
    """Each key a qualified label key, each value a label value (the schema bounds the count)."""
    problems: list[fields.FieldError] = []
    for key, value in (selector.items() if isinstance(selector, dict) else ()):
        at = f"{path}[{key}]"
        for problem in names.qualified_name_problems(str(key)):
            problems.append(fields.invalid(at, key, f"a label key: {problem}"))
        if isinstance(value, str):
            for problem in names.label_value_problems(value):
                problems.append(fields.invalid(at, value, f"a label value {problem}"))
    return problems
