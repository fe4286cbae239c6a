"""Request options as values (list, watch, delete) and the combinations Kubernetes refuses."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from apiserver import errors
from apiserver.registry import selectors, statuses
from openapi import fields

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


@dataclasses.dataclass(frozen=True, slots=True)
class ListOptions:
    label_selector: selectors.LabelSelector = selectors.EVERYTHING
    field_selector: selectors.FieldSelector = selectors.ANY_FIELD
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    send_initial_events: bool | None = None
    """Only meaningful for watch; a list that sets it is refused."""


@dataclasses.dataclass(frozen=True, slots=True)
class WatchOptions:
    label_selector: selectors.LabelSelector = selectors.EVERYTHING
    field_selector: selectors.FieldSelector = selectors.ANY_FIELD
    resource_version: str = ""
    resource_version_match: str = ""
    send_initial_events: bool | None = None
    allow_bookmarks: bool = False
    timeout_seconds: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteOptions:
    uid: str = ""
    """Precondition: the object's UID must be this one."""
    resource_version: str = ""
    """Precondition: the object's resourceVersion must be this one."""
    propagation_policy: str = ""
    orphan_dependents: bool | None = None
    dry_run: bool = False


def invalid(kind: str, problems: Sequence[fields.FieldError]) -> errors.Invalid:
    """The 422 for bad options: ``ListOptions.meta.k8s.io "" is invalid: ...``."""
    return errors.Invalid(
        fields.invalid_message(kind, "meta.k8s.io", "", problems),
        details={"group": "meta.k8s.io", "kind": kind, "causes": statuses.causes(problems)},
    )


def _match_supported(match: str) -> list[fields.FieldError]:
    if match in ("", EXACT, NOT_OLDER_THAN):
        return []
    return [fields.not_supported("resourceVersionMatch", match, (EXACT, NOT_OLDER_THAN, ""))]


def check_list(options: ListOptions) -> None:
    problems = _match_supported(options.resource_version_match)
    match = options.resource_version_match
    if match and not options.resource_version:
        problems.append(fields.forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ))
    if match and options.continue_token:
        problems.append(fields.forbidden(
            "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
        ))
    if match == EXACT and options.resource_version == "0":
        problems.append(fields.forbidden(
            "resourceVersionMatch",
            'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ))
    if options.send_initial_events is not None:
        problems.append(fields.forbidden(
            "sendInitialEvents", "sendInitialEvents is forbidden for list"
        ))
    if options.limit < 0:
        problems.append(fields.invalid("limit", options.limit, "must be zero or positive"))
    if problems:
        raise invalid("ListOptions", problems)


def check_watch(options: WatchOptions) -> None:
    if options.resource_version not in ("", "0"):
        parse_revision(options.resource_version)
    match = options.resource_version_match
    problems = []
    if options.send_initial_events is not None and match != NOT_OLDER_THAN:
        problems.append(fields.forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ))
    if match:
        if options.send_initial_events is None:
            problems.append(fields.forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ))
        if match != NOT_OLDER_THAN:
            problems.append(fields.not_supported("resourceVersionMatch", match, (NOT_OLDER_THAN,)))
    if problems:
        raise invalid("ListOptions", problems)


def check_delete(options: DeleteOptions) -> None:
    problems = []
    policy = options.propagation_policy
    if policy and policy not in PROPAGATION_POLICIES:
        problems.append(fields.not_supported("propagationPolicy", policy, PROPAGATION_POLICIES))
    if policy and options.orphan_dependents is not None:
        problems.append(fields.invalid(
            "propagationPolicy", policy,
            "orphanDependents and deletionPropagation cannot be both set",
        ))
    if problems:
        raise invalid("DeleteOptions", problems)


MAX_REVISION = 2**63 - 1


def parse_revision(value: str) -> int:
    """A resourceVersion as an integer; BadRequest (400) when it is not one of ours: ASCII digits
    only (``str.isdigit`` would take other scripts' digits) and within int64, like etcd's."""
    if not (value.isascii() and value.isdigit()) or len(value) > 19 or int(value) > MAX_REVISION:
        raise errors.BadRequest(f"invalid resource version {fields.render(value)}: resourceVersion"
                                " must be a revision of this server, a decimal integer")
    return int(value)
