"""Label and field selectors given as kube's text (``app=a,tier!=b,env in (x,y),!legacy``) in the
form lightkube's ``list``/``watch`` take: (key, operator) pairs, which it encodes back to the
same text. A mapping passes through unchanged."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lightkube import operators

Pairs = list[tuple[str, Any]]

_SET = re.compile(r"^([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)$")
_BINARY = re.compile(r"^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$")
_KEY = re.compile(r"^(!?)\s*([^\s!=(),]+)$")


def _requirements(text: str) -> list[str]:
    """The comma-separated requirements, commas inside ``( )`` kept."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts


def pairs(text: str) -> Pairs:
    """``text`` as lightkube selector pairs; ``ValueError`` naming the requirement otherwise."""
    found: Pairs = []
    for requirement in _requirements(text.strip()):
        if matched := _SET.match(requirement):
            values = [v.strip() for v in matched[3].split(",") if v.strip()]
            op = operators.in_ if matched[2] == "in" else operators.not_in
            found.append((matched[1], op(values)))
        elif matched := _BINARY.match(requirement):
            value = matched[3]
            found.append((matched[1], operators.not_equal(value) if matched[2] == "!="
                           else operators.equal(value)))  # fmt: skip
        elif matched := _KEY.match(requirement):
            found.append((matched[2], operators.not_exists() if matched[1] else
                          operators.exists()))  # fmt: skip
        else:
            raise ValueError(f"not a selector requirement: {requirement[:80]!r}")
    return found


def for_lightkube(selector: Mapping[str, Any] | str | None) -> Mapping[str, Any] | Pairs | None:
    if not selector:
        return None
    if isinstance(selector, str):
        return pairs(selector)
    return selector
