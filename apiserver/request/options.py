"""The typed options of a request, each built from the one parsed ``Query``.

List, watch, write (Create/Update/PatchOptions), the query half of DeleteOptions, and the table
view's ``includeObject``. Every value is checked as kube checks it and refused with a 400 (or the
422 kube answers for an unsupported option value) naming the parameter.
"""

from __future__ import annotations

import dataclasses

from apiserver import errors
from apiserver.registry import options, selectors
from apiserver.request import query as queries
from openapi import fields

FIELD_VALIDATION = ("Ignore", "Strict", "Warn")
INCLUDE_OBJECT = ("None", "Metadata", "Object")
DRY_RUN = ("All",)
FIELD_MANAGER_MAX = 128
"""kube's limit on ``fieldManager`` (bytes)."""


@dataclasses.dataclass(frozen=True, slots=True)
class WriteOptions:
    dry_run: bool = False
    field_validation: str = "Warn"
    field_manager: str = ""
    force: bool | None = None
    """``force`` (an apply's, to take conflicting fields over); None when not sent."""


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteQuery:
    """The query half of a delete's options; the body may override each part."""

    dry_run: tuple[str, ...] = ()
    propagation_policy: str = ""
    orphan_dependents: bool | None = None


def list_options(query: queries.Query) -> options.ListOptions:
    query.boolean("watch")  # the verb read kube's fallback; the option itself must parse
    query.integer("timeoutSeconds")  # a list answers at once, but a malformed one is refused
    return options.ListOptions(
        label_selector=selectors.parse_labels(query.get("labelSelector")),
        field_selector=selectors.parse_fields(query.get("fieldSelector")),
        limit=query.integer("limit") or 0,
        continue_token=query.get("continue"),
        resource_version=query.get("resourceVersion"),
        resource_version_match=query.get("resourceVersionMatch"),
        send_initial_events=query.boolean("sendInitialEvents"),
    )


def watch_options(query: queries.Query) -> options.WatchOptions:
    query.boolean("watch")  # the verb read kube's fallback; the option itself must parse
    timeout = query.integer("timeoutSeconds")
    query.integer("limit")  # a watch ignores it, but a malformed one is refused as for a list
    return options.WatchOptions(
        label_selector=selectors.parse_labels(query.get("labelSelector")),
        field_selector=selectors.parse_fields(query.get("fieldSelector")),
        resource_version=query.get("resourceVersion"),
        resource_version_match=query.get("resourceVersionMatch"),
        send_initial_events=query.boolean("sendInitialEvents"),
        allow_bookmarks=bool(query.boolean("allowWatchBookmarks")),
        timeout_seconds=float(timeout) if timeout is not None and timeout > 0 else None,
    )


def dry_run(values: tuple[str, ...] | list[str], kind: str) -> bool:
    """``dryRun``: only ``All`` is a value (422 naming the first other one)."""
    bad = [value for value in values if value not in DRY_RUN]
    if bad:
        raise options.invalid(kind, [fields.not_supported("dryRun", bad[0], DRY_RUN)])
    return bool(values)


def write_options(query: queries.Query, kind: str) -> WriteOptions:
    """``kind`` names the options in messages: CreateOptions, UpdateOptions or PatchOptions."""
    problems: list[fields.FieldError] = []
    mode = query.get("fieldValidation") or "Warn"
    if mode not in FIELD_VALIDATION:
        problems.append(fields.not_supported("fieldValidation", mode, FIELD_VALIDATION))
    manager = query.get("fieldManager")
    if len(manager.encode()) > FIELD_MANAGER_MAX:
        problems.append(fields.too_long("fieldManager", manager, FIELD_MANAGER_MAX, "bytes"))
    elif not manager.isprintable():
        problems.append(fields.invalid("fieldManager", manager,
                                       "must only contain printable characters"))
    dry = dry_run(query.all("dryRun"), kind)
    force = query.boolean("force")
    if problems:
        raise options.invalid(kind, problems)
    return WriteOptions(dry_run=dry, field_validation=mode, field_manager=manager, force=force)


def delete_query(query: queries.Query) -> DeleteQuery:
    orphan = query.boolean("orphanDependents")
    query.integer("gracePeriodSeconds")  # checked; no resource here deletes gracefully
    return DeleteQuery(dry_run=query.all("dryRun"),
                       propagation_policy=query.get("propagationPolicy"),
                       orphan_dependents=orphan)


def include_object(query: queries.Query) -> str:
    """``includeObject``: Metadata when unset; 400 for anything but None/Metadata/Object."""
    value = query.get("includeObject") or "Metadata"
    if value not in INCLUDE_OBJECT:
        raise errors.BadRequest(
            f"includeObject: Unsupported value: {fields.render(value)}: supported values:"
            ' "None", "Metadata", "Object"')
    return value
