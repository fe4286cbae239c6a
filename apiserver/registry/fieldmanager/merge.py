"""An applied configuration merged into the live object, and fields taken out of an object.

The schema says how each part merges, as structured-merge-diff reads it: objects and granular
maps field by field, ``map`` lists item by item on their keys (the configuration's fields win
inside an item), ``set`` lists as a union, everything else (scalars, ``atomic`` lists and maps,
free-form values) replaced whole. Nothing here checks the result; the strategy and admission do.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import orjson

from apiserver.registry.fieldmanager import fieldsets
from openapi import schema as schemas


def _body(sub: Any) -> schemas.Schema:
    return schemas.resolve(sub) if isinstance(sub, dict) else {}


def _granular(body: schemas.Schema) -> bool:
    return bool(body.get("properties") or isinstance(body.get("additionalProperties"), dict)) \
        and body.get("x-kubernetes-map-type") != "atomic"


def _child(body: schemas.Schema, name: str) -> Any:
    properties = body.get("properties")
    return properties.get(name) if properties else body.get("additionalProperties")


def merge(sub: Any, live: Any, config: Any) -> Any:
    """``config`` applied over ``live``; neither is changed."""
    body = _body(sub)
    if not body or body.get("x-kubernetes-preserve-unknown-fields"):
        return copy.deepcopy(config)
    if isinstance(config, dict) and isinstance(live, dict) and _granular(body):
        result = dict(live)
        for name, value in config.items():
            result[name] = (merge(_child(body, name), live[name], value) if name in live
                            else copy.deepcopy(value))
        return result
    list_type = body.get("x-kubernetes-list-type")
    if isinstance(config, list) and isinstance(live, list) and list_type == "set":
        seen = {fieldsets.value_element(item) for item in live}
        result_set = list(live)
        for item in config:
            key = fieldsets.value_element(item)
            if key not in seen:
                seen.add(key)
                result_set.append(copy.deepcopy(item))
        return result_set
    if isinstance(config, list) and isinstance(live, list) and list_type == "map":
        keys = tuple(body.get("x-kubernetes-list-map-keys") or ())
        result_map = list(live)
        where = {fieldsets.item_key(item, keys): index for index, item in enumerate(live)}
        for item in config:
            key = fieldsets.item_key(item, keys)
            if key in where:
                index = where[key]
                result_map[index] = merge(body.get("items"), live[index], item)
            else:
                where[key] = len(result_map)
                result_map.append(copy.deepcopy(item))
        return result_map
    return copy.deepcopy(config)


def remove(obj: dict[str, Any], paths: Iterable[fieldsets.Path]) -> None:
    """Take ``paths`` out of ``obj`` in place (a path not there is skipped), then the objects
    left empty by it below the top level (``spec.source.huggingFace.secretRef`` once its only
    field went)."""
    for path in sorted(paths, key=len, reverse=True):
        trail: list[tuple[Any, Any]] = []  # (container, key or index) down to the path
        node: Any = obj
        for element in path:
            found = _step(node, element)
            if found is None:
                break
            trail.append((node, found))
            node = node[found]
        else:
            container, key = trail.pop()
            del container[key]
            while len(trail) > 1:
                container, key = trail.pop()
                if container[key] in ({}, []):
                    del container[key]
                else:
                    break


def _step(node: Any, element: str) -> Any:
    """The key or index ``element`` names in ``node``, None when it is not there."""
    prefix, _, rest = element.partition(":")
    if prefix == "f":
        return rest if isinstance(node, dict) and rest in node else None
    if not isinstance(node, list):
        return None
    if prefix == "i":
        index = int(rest)
        return index if index < len(node) else None
    wanted = orjson.loads(rest)
    for index, item in enumerate(node):
        if prefix == "v" and fieldsets.same(item, wanted):
            return index
        if (prefix == "k" and isinstance(item, dict) and isinstance(wanted, dict)
                and all(name in item and fieldsets.same(item[name], value)
                        for name, value in wanted.items())):
            return index
    return None
