"""``metadata.managedFields``: who owns which fields, and the two operations that change it.

An **Update** (create, update, a JSON or merge patch) gives its manager every field it added or
changed and takes those fields from everyone else, as kube's field manager does: an update always
wins. An **Apply** owns exactly the fields of its configuration: a field another manager owns
and the configuration would change is a conflict (409, kube's message) unless forced, when the
field changes hands; a field both set to the same value is shared; a field the applier gave up
and nobody else owns is removed from the object. Entries are kept in kube's order (Apply before
Update, then by time, manager, subresource) and a manager's time moves only when its write
changed something, so a write that changes nothing stores nothing (the same resourceVersion).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from apiserver import errors
from apiserver.registry.fieldmanager import fieldsets, merge
from openapi import schema as schemas

APPLY = "Apply"
UPDATE = "Update"
FIELDS_V1 = "FieldsV1"
MAX_UPDATE_MANAGERS = 10
"""Update entries kept apart; older ones are folded into ``ANCIENT`` (kube's cap)."""
ANCIENT = "ancient-changes"
MAX_LISTED_CONFLICTS = 100
"""Conflicts a 409 lists one by one (message and causes); the rest are counted."""


@dataclasses.dataclass(slots=True)
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str
    subresource: str
    fields: set[fieldsets.Path]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.manager, self.operation, self.subresource)

    def described(self) -> str:
        """The manager as kube's conflict messages name it."""
        text = json.dumps(self.manager, ensure_ascii=False)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource, ensure_ascii=False)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


def decode(raw: Any) -> list[Entry]:
    """The entries of a ``managedFields`` value; ``ValueError`` when it is not one, as kube's
    decoder refuses it (the caller then falls back to the stored entries)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("managedFields must be a list")
    found: dict[tuple[str, str, str], Entry] = {}
    for item in raw:
        if not isinstance(item, dict):
            raise ValueError("a managedFields entry must be an object")
        manager, operation = item.get("manager", ""), item.get("operation")
        api_version, time = item.get("apiVersion", ""), item.get("time", "")
        subresource = item.get("subresource", "")
        if operation not in (APPLY, UPDATE):
            raise ValueError("operation must be Apply or Update")
        if item.get("fieldsType", FIELDS_V1) != FIELDS_V1:
            raise ValueError("fieldsType must be FieldsV1")
        if not all(isinstance(v, str) for v in (manager, api_version, time, subresource)):
            raise ValueError("manager, apiVersion, time and subresource must be strings")
        paths = fieldsets.decode(item.get("fieldsV1", {}))
        entry = Entry(manager, operation, api_version, time, subresource, paths)
        if entry.key in found:
            found[entry.key].fields |= paths
        else:
            found[entry.key] = entry
    return list(found.values())


def decode_or_empty(raw: Any) -> list[Entry]:
    try:
        return decode(raw)
    except ValueError:
        return []


def encode(entries: list[Entry]) -> list[dict[str, Any]]:
    """The ``managedFields`` value: entries owning something, in kube's order."""
    kept = sorted((entry for entry in entries if entry.fields),
                  key=lambda e: (e.operation, e.time, e.manager, e.api_version, e.subresource))
    encoded: list[dict[str, Any]] = []
    for entry in kept:
        item: dict[str, Any] = {"manager": entry.manager, "operation": entry.operation,
                                "apiVersion": entry.api_version}
        if entry.time:
            item["time"] = entry.time
        item["fieldsType"] = FIELDS_V1
        item["fieldsV1"] = fieldsets.encode(entry.fields)
        if entry.subresource:
            item["subresource"] = entry.subresource
        encoded.append(item)
    return encoded


def _changes(before: fieldsets.Fields,
             after: fieldsets.Fields) -> tuple[set[fieldsets.Path], set[fieldsets.Path]]:
    """(added or modified, removed) paths from ``before`` to ``after``."""
    changed = {path for path, value in after.items()
               if path not in before or not fieldsets.same(before[path], value)}
    return changed, set(before) - set(after)


def _mine(entries: list[Entry], key: tuple[str, str, str], api_version: str) -> Entry:
    for entry in entries:
        if entry.key == key:
            return entry
    entry = Entry(key[0], key[1], api_version, "", key[2], set())
    entries.append(entry)
    return entry


def update(kind: str, entries: list[Entry], old: Any, new: Any, *, manager: str,
           subresource: str, api_version: str, now: str) -> list[Entry]:
    """``entries`` after ``manager`` wrote ``new`` over ``old`` (``{}`` for a create)."""
    schema = schemas.for_kind(kind)
    changed, removed = _changes(fieldsets.of(schema, old, subresource),
                                fieldsets.of(schema, new, subresource))
    entries = [dataclasses.replace(entry, fields=set(entry.fields)) for entry in entries]
    key = (manager, UPDATE, subresource)
    for entry in entries:
        if entry.key != key:
            entry.fields -= changed | removed
    mine = _mine(entries, key, api_version)
    mine.fields = (mine.fields | changed) - removed
    if changed or removed:
        mine.time = now
        mine.api_version = api_version
    return _capped([entry for entry in entries if entry.fields])


def apply(kind: str, entries: list[Entry], live: dict[str, Any] | None,
          config: dict[str, Any], *, manager: str, subresource: str, force: bool,
          api_version: str, now: str) -> tuple[dict[str, Any], list[Entry]]:
    """The object and entries after ``manager`` applied ``config`` to ``live`` (None: it does
    not exist yet); raises kube's 409 on conflicts unless ``force``."""
    schema = schemas.for_kind(kind)
    live = live or {}
    merged = merge.merge(schema, live, config)
    applied = fieldsets.of(schema, config, subresource)
    before = fieldsets.of(schema, live, subresource)
    after = fieldsets.of(schema, merged, subresource)
    changed = {path for path in applied
               if path not in before or not fieldsets.same(before[path], after.get(path))}
    entries = [dataclasses.replace(entry, fields=set(entry.fields)) for entry in entries]
    key = (manager, APPLY, subresource)
    conflicts = [(entry, path) for entry in entries if entry.key != key
                 for path in sorted(entry.fields & changed)]
    if conflicts and not force:
        raise conflict(conflicts)
    for entry in entries:
        if entry.key != key:
            entry.fields -= changed
    mine = _mine(entries, key, api_version)
    gave_up = mine.fields - set(applied)
    owned: set[fieldsets.Path] = set(applied)
    for entry in entries:
        if entry.key != key:
            owned |= entry.fields
    above = {path[:depth] for path in owned for depth in range(1, len(path))}
    merge.remove(merged, (path for path in gave_up if path not in owned and path not in above))
    result = fieldsets.of(schema, merged, subresource)
    added, dropped = _changes(before, result)
    moved = bool(added or dropped)
    if mine.fields != set(applied) or moved or not mine.time:
        mine.time = now
    mine.fields = set(applied)
    mine.api_version = api_version
    return merged, _capped([entry for entry in entries if entry.fields])


def _capped(entries: list[Entry]) -> list[Entry]:
    """At most ``MAX_UPDATE_MANAGERS`` Update entries, ``ANCIENT`` included: the oldest fold
    into it."""
    updates = [e for e in entries if e.operation == UPDATE]
    if len(updates) <= MAX_UPDATE_MANAGERS:
        return entries
    ancient = next((e for e in updates if e.key == (ANCIENT, UPDATE, "")), None)
    oldest = sorted((e for e in updates if e is not ancient), key=lambda e: e.time)
    kept = list(entries)
    excess = len(updates) - MAX_UPDATE_MANAGERS
    if ancient is None:
        ancient = Entry(ANCIENT, UPDATE, oldest[0].api_version, "", "", set())
        kept.append(ancient)
        excess += 1  # the new bucket counts too
    for entry in oldest[:excess]:
        ancient.fields |= entry.fields
        ancient.time = max(ancient.time, entry.time)
        kept = [e for e in kept if e is not entry]
    return kept


def conflict(found: list[tuple[Entry, fieldsets.Path]]) -> errors.Conflict:
    """kube's 409 for an apply's conflicts: one line for one, grouped by manager for more."""
    listed = found[:MAX_LISTED_CONFLICTS]
    causes: list[errors.Cause] = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {entry.described()}",
         "field": fieldsets.render(path)} for entry, path in listed]
    if len(found) == 1:
        entry, path = found[0]
        message = (f"Apply failed with 1 conflict: conflict with {entry.described()}:"
                   f" {fieldsets.render(path)}")
    else:
        by_manager: dict[str, list[str]] = {}
        order: dict[str, str] = {}
        for entry, path in listed:
            name = entry.described()
            by_manager.setdefault(name, []).append(f"- {fieldsets.render(path)}")
            order[name] = json.dumps({"manager": entry.manager, "operation": entry.operation})
        lines: list[str] = []
        for name in sorted(by_manager, key=lambda n: order[n]):
            lines.append(f"conflicts with {name}:")
            lines.extend(by_manager[name])
        if len(found) > len(listed):
            lines.append(f"- and {len(found) - len(listed)} more")
        message = f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)
    return errors.Conflict(message, details={"causes": causes})
