"""The query string, read once: each parameter's values, the one accessor every layer uses, and
the typed options read from it.

A parameter the API knows as single-valued (everything but ``dryRun`` and the health checks'
``exclude``) may be given at most once: a second occurrence makes the request a 400 naming the
parameter, so no two readers can ever take different values of it. Values are checked as kube
parses them: booleans as Go's ``strconv.ParseBool`` spells them, integers within int64. Unknown
parameters are ignored, as kube-apiserver ignores them. No message echoes more than a cut of a
value.

The typed options (list, watch, write: Create/Update/PatchOptions, the query half of
DeleteOptions, and the table view's ``includeObject``) are each built from the one parsed
``Query``; every value is checked as kube checks it and refused with a 400 (or the 422 kube
answers for an unsupported option value) naming the parameter.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Mapping

from apiserver import errors
from apiserver.registry import options, selectors
from openapi import fields

MULTI_VALUED = frozenset({"dryRun", "exclude"})
"""Parameters kube reads as lists; every other known parameter is single-valued."""
SINGLE_VALUED = frozenset({
    "watch", "labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch",
    "limit", "continue", "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents",
    "fieldManager", "fieldValidation", "force", "propagationPolicy", "orphanDependents",
    "gracePeriodSeconds", "pretty", "timeout", "includeObject", "hash", "verbose",
})
MAX_PARAMETERS = 128
"""Parameters one query may carry (kubectl sends a handful); more is a 400 before any work."""
TRUE = ("1", "t", "T", "TRUE", "true", "True")
FALSE = ("0", "f", "F", "FALSE", "false", "False")
_INT64 = re.compile(r"-?[0-9]{1,19}")


@dataclasses.dataclass(frozen=True, slots=True)
class Query:
    """Every value of every parameter, in the order sent; read through the accessors only."""

    values: Mapping[str, tuple[str, ...]]
    problem: errors.StatusError | None = None
    """Why the query cannot be served (a repeated single-valued parameter, too many
    parameters), found while parsing; ``RequestInfo`` refuses the request with it."""

    def has(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str, default: str = "") -> str:
        """The value of a single-valued parameter (its first, and when the query is servable its
        only, occurrence), ``default`` when absent."""
        found = self.values.get(name)
        return found[0] if found else default

    def all(self, name: str) -> tuple[str, ...]:
        """Every value of a multi-valued parameter."""
        return self.values.get(name, ())

    def boolean(self, name: str) -> bool | None:
        """None when absent; 400 unless it is a boolean as kube spells them."""
        if name not in self.values:
            return None
        value = self.get(name)
        if value in TRUE:
            return True
        if value in FALSE:
            return False
        raise errors.BadRequest(
            f'invalid value for "{name}": {fields.render(value)} is not a boolean')

    def integer(self, name: str) -> int | None:
        """None when absent or empty; 400 unless it is a 64-bit integer (as kube parses it)."""
        value = self.get(name)
        if not value:
            return None
        if not _INT64.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
            raise errors.BadRequest(
                f'invalid value for "{name}": {fields.render(value)} is not a 64-bit integer')
        return int(value)


EMPTY = Query({})


def parse(query_string: str) -> Query:
    """The query of one request (``scope["query_string"]``, percent-decoded as UTF-8)."""
    if not query_string:
        return EMPTY
    try:
        pairs = urllib.parse.parse_qsl(query_string, keep_blank_values=True,
                                       max_num_fields=MAX_PARAMETERS)
    except ValueError:
        return Query({}, errors.BadRequest(
            f"the query has more than {MAX_PARAMETERS} parameters"))
    values: dict[str, list[str]] = {}
    for name, value in pairs:
        values.setdefault(name, []).append(value)
    problem: errors.StatusError | None = None
    for name, found in values.items():
        if len(found) > 1 and name in SINGLE_VALUED:
            problem = errors.BadRequest(
                f'query parameter "{name}" was given {len(found)} times; it may be given at'
                " most once")
            break
    return Query({name: tuple(found) for name, found in values.items()}, problem)


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


def list_options(query: Query) -> options.ListOptions:
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


def watch_options(query: Query) -> options.WatchOptions:
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


def write_options(query: Query, kind: str) -> WriteOptions:
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


def delete_query(query: Query) -> DeleteQuery:
    orphan = query.boolean("orphanDependents")
    query.integer("gracePeriodSeconds")  # checked; no resource here deletes gracefully
    return DeleteQuery(dry_run=query.all("dryRun"),
                       propagation_policy=query.get("propagationPolicy"),
                       orphan_dependents=orphan)


def include_object(query: Query) -> str:
    """``includeObject``: Metadata when unset; 400 for anything but None/Metadata/Object."""
    value = query.get("includeObject") or "Metadata"
    if value not in INCLUDE_OBJECT:
        raise errors.BadRequest(
            f"includeObject: Unsupported value: {fields.render(value)}: supported values:"
            ' "None", "Metadata", "Object"')
    return value
