"""The field reference of docs/api.md, rendered from the schema so the docs cannot drift.

``python -m openapi.reference`` prints the tables; a unit test checks docs/api.md holds them.
"""

from __future__ import annotations

from typing import Any

from openapi import grammar, reasons
from openapi import schema as schemas

_LIMITS = (("minimum", "min"), ("maximum", "max"), ("multipleOf", "step"),
           ("minLength", "min length"), ("maxLength", "max length"), ("maxItems", "max items"),
           ("maxProperties", "max entries"))
_PATTERNS = {grammar.DIGEST_PATTERN: "sha256 digest",
             reasons.CONDITION_REASON_PATTERN: "CamelCase word",
             schemas.PEER_URL_PATTERN: "https://HOST:PORT"}


def _type(body: schemas.Schema) -> str:
    if body.get("format") == "date-time":
        return "time"
    if body.get("type") == "array":
        return "[]" + _type(schemas.resolve(body["items"]))
    return str(body.get("type", ""))


def _limits(wrapper: schemas.Schema, body: schemas.Schema) -> str:
    limits = [f"{label} {body[key]}" for key, label in _LIMITS if key in body]
    if body.get("type") == "array":
        item = schemas.resolve(body["items"])
        limits += [f"each: {label} {item[key]}" for key, label in _LIMITS if key in item]
        if "pattern" in item:
            limits.append("each: " + _PATTERNS.get(item["pattern"], "pattern"))
    if "pattern" in body:
        limits.append(_PATTERNS.get(body["pattern"], f"pattern `{body['pattern']}`"))
    if "enum" in body:
        limits.append("one of " + ", ".join(f"`{value}`" if value else '`""`'
                                            for value in body["enum"]))
    if wrapper.get("nullable") or body.get("nullable"):
        limits.append("nullable")
    return "; ".join(limits)


def _rows(sub: schemas.Schema, path: str, rows: list[tuple[str, ...]]) -> None:
    body = schemas.resolve(sub)
    required = body.get("required", [])
    for name, child in body.get("properties", {}).items():
        if not path and name in ("apiVersion", "kind", "metadata"):
            continue
        child_body = schemas.resolve(child)
        field = f"{path}.{name}" if path else name
        default: Any = child.get("default", child_body.get("default"))
        rows.append((
            f"`{field}`", _type(child_body), "yes" if name in required else "",
            "" if default in (None, {}) else f"`{default}`", _limits(child, child_body),
            str(child.get("description") or child_body.get("description", "")).replace("|", "/"),
        ))
        if child_body.get("type") == "object":
            _rows(child, field, rows)
        elif child_body.get("type") == "array" and "properties" in schemas.resolve(
                child_body["items"]):
            _rows(child_body["items"], field + "[]", rows)


def field_table(kind: str) -> str:
    """A Markdown table of every field of ``kind``: type, required, default, limits, meaning."""
    rows: list[tuple[str, ...]] = []
    _rows(schemas.for_kind(kind), "", rows)
    lines = ["| Field | Type | Required | Default | Limits | Meaning |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    for name in schemas.KINDS:
        print(f"### {name}\n\n{field_table(name)}")
