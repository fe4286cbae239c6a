"""The fields an object sets, read through its schema, and their ``FieldsV1`` form.

A path is a tuple of ``FieldsV1`` keys: ``f:<name>`` for a field or a map key, ``k:<json>`` for
the item of a ``map`` list (its keys as a JSON object, sorted), ``v:<json>`` for the item of a
``set`` list, ``i:<n>`` for an index. A field set maps each path the object sets to its value:
leaves (scalars, ``atomic`` lists and maps, free-form values) with their values, and the items
of associative lists with ``ITEM`` (an item is owned on its own, beside its fields), as
structured-merge-diff reads an object. ``render`` spells a path as kube's conflict messages do
(``.status.conditions[type="Ready"].status``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from openapi import schema as schemas

Path = tuple[str, ...]
Fields = dict[Path, Any]


class _Item:
    """The value recorded for an associative list's item: equal only to itself."""

    def __repr__(self) -> str:
        return "ITEM"


ITEM: Any = _Item()
MEMBER = "."
"""The ``FieldsV1`` key saying the path of its node is itself in the set."""
MAX_DEPTH = 64
"""Nesting a decoded ``FieldsV1`` may have (the request bodies' own limit)."""

_SERVER_METADATA = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink",
})
"""Metadata the server sets, which nobody owns (kube's field manager strips the same)."""


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def item_key(item: Any, keys: Iterable[str]) -> str:
    """The ``k:`` element of a ``map`` list's item (its keys' values, as kube encodes them)."""
    found = {key: item[key] for key in keys if isinstance(item, dict) and key in item}
    return "k:" + _json(found)


def value_element(item: Any) -> str:
    """The ``v:`` element of a ``set`` list's item."""
    return "v:" + _json(item)


def same(left: Any, right: Any) -> bool:
    """Equal as JSON values (``1`` is not ``true``, key order does not count)."""
    if left is ITEM or right is ITEM:
        return left is right
    if type(left) is not type(right):
        return False
    if isinstance(left, dict | list):
        return _json(left) == _json(right)
    return bool(left == right)


def of(kind_schema: schemas.Schema, obj: Any, subresource: str = "") -> Fields:
    """The fields ``obj`` sets that a writer of the main resource (``subresource`` empty) or of
    ``subresource`` (``status``) can own: the main resource never owns ``status`` (the strategy
    keeps the stored one), the status subresource owns nothing else; server metadata, ``kind``
    and ``apiVersion`` are nobody's."""
    found: Fields = {}
    if not isinstance(obj, dict):
        return found
    properties = schemas.resolve(kind_schema).get("properties") or {}
    for name, value in obj.items():
        if name in ("apiVersion", "kind") or (name == "status") != (subresource == "status"):
            continue
        if name == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _SERVER_METADATA}
            if not value:
                continue
        _walk(properties.get(name), value, ("f:" + name,), found)
    return found


def _walk(sub: schemas.Schema | None, value: Any, path: Path, found: Fields) -> None:
    body = schemas.resolve(sub) if isinstance(sub, dict) else {}
    if not body or body.get("x-kubernetes-preserve-unknown-fields"):
        found[path] = value
        return
    if isinstance(value, dict) and body.get("x-kubernetes-map-type") != "atomic":
        properties: dict[str, schemas.Schema] = body.get("properties") or {}
        extra = body.get("additionalProperties")
        if not value or not (properties or isinstance(extra, dict)):
            found[path] = value
            return
        for name, child in value.items():
            schema = properties.get(name) if properties else extra
            _walk(schema if isinstance(schema, dict) else None, child, (*path, "f:" + name),
                  found)
        return
    list_type = body.get("x-kubernetes-list-type")
    if isinstance(value, list) and value and list_type in ("set", "map"):
        items = body.get("items")
        if list_type == "set":
            for item in value:
                found[(*path, value_element(item))] = item
            return
        keys = tuple(body.get("x-kubernetes-list-map-keys") or ())
        for item in value:
            where = (*path, item_key(item, keys))
            found[where] = ITEM
            if isinstance(item, dict):
                for name, child in item.items():
                    schema = (schemas.resolve(items).get("properties") or {}).get(name) \
                        if isinstance(items, dict) else None
                    _walk(schema, child, (*where, "f:" + name), found)
        return
    found[path] = value


# FieldsV1 -----------------------------------------------------------------------------------


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """The ``FieldsV1`` tree of a set of paths, keys sorted as kube writes them."""
    root: dict[str, Any] = {}
    members: set[Path] = set()
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
        members.add(path)
    for path in members:
        node = root
        for element in path:
            node = node[element]
        if node:
            node[MEMBER] = {}
    return _sorted(root)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {key: _sorted(node[key]) for key in sorted(node)}


def decode(tree: Any) -> set[Path]:
    """The paths of a ``FieldsV1`` tree; ``ValueError`` naming the problem when it is not one
    (a non-object node, an unknown key prefix, a key that does not parse, too deep)."""
    if not isinstance(tree, dict):
        raise ValueError("fieldsV1 must be an object")
    found: set[Path] = set()
    stack: list[tuple[Path, dict[str, Any]]] = [((), tree)]
    while stack:
        path, node = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ValueError(f"fieldsV1 is nested deeper than {MAX_DEPTH} levels")
        if not node and path:
            found.add(path)
        for key, child in node.items():
            if not isinstance(child, dict):
                raise ValueError(f"fieldsV1 key {key[:64]!r} must hold an object")
            if key == MEMBER:
                if child or not path:
                    raise ValueError("fieldsV1 '.' must be an empty object below a field")
                found.add(path)
                continue
            _check_element(key)
            stack.append(((*path, key), child))
    return found


def _check_element(key: str) -> None:
    prefix, _, rest = key.partition(":")
    if prefix == "f" and rest:
        return
    if prefix == "i" and rest.isascii() and rest.isdigit():
        return
    if prefix in ("k", "v"):
        try:
            parsed = orjson.loads(rest)
        except orjson.JSONDecodeError:
            raise ValueError(f"fieldsV1 key {key[:64]!r} is not valid JSON") from None
        if prefix == "v" or isinstance(parsed, dict):
            return
    raise ValueError(f"fieldsV1 key {key[:64]!r} is not a field, key, value or index")


def render(path: Path) -> str:
    """A path as kube's messages spell it: ``.spec.x``, ``[type="Ready"]``, ``[="v"]``,
    ``[0]``."""
    parts: list[str] = []
    for element in path:
        prefix, _, rest = element.partition(":")
        if prefix == "f":
            parts.append("." + rest)
        elif prefix == "k":
            keys = orjson.loads(rest)
            parts.append("[" + ",".join(f"{name}={_json(keys[name])}" for name in keys) + "]")
        elif prefix == "v":
            parts.append(f"[={rest}]")
        else:
            parts.append(f"[{rest}]")
    return "".join(parts)
