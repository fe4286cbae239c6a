"""The Status errors the registry raises, worded and detailed as kube-apiserver does.

Object errors name the resource as ``<plural>.<group>`` and carry ``details.kind = <plural>``;
validation (422) carries the Kind and one cause per field error.
"""

from __future__ import annotations

from collections.abc import Sequence

from apiserver import errors
from apiserver.storage import interface
from openapi import fields, resources


def causes(problems: Sequence[fields.FieldError]) -> list[errors.Cause]:
    """At most ``fields.MAX_CAUSES`` causes (see ``fields.bounded``)."""
    return [{"type": p.type, "message": p.message, "field": p.field}
            for p in fields.bounded(problems)]


def _details(info: resources.ResourceInfo, name: str) -> errors.StatusDetails:
    return {"name": name, "group": info.group, "kind": info.plural}


def not_found(info: resources.ResourceInfo, name: str) -> errors.NotFound:
    return errors.NotFound(f'{info.group_resource} "{name}" not found',
                           details=_details(info, name))


def exists(info: resources.ResourceInfo, name: str) -> errors.AlreadyExists:
    return errors.AlreadyExists(f'{info.group_resource} "{name}" already exists',
                                details=_details(info, name))


def conflict(info: resources.ResourceInfo, name: str, why: str) -> errors.Conflict:
    return errors.Conflict(
        f'Operation cannot be fulfilled on {info.group_resource} "{name}": {why}',
        details=_details(info, name),
    )


def stale(info: resources.ResourceInfo, name: str) -> errors.Conflict:
    return conflict(info, name, "the object has been modified; please apply your changes to the"
                                " latest version and try again")


def invalid(info: resources.ResourceInfo, name: str,
            problems: Sequence[fields.FieldError]) -> errors.Invalid:
    return errors.Invalid(
        fields.invalid_message(info.kind, info.group, name, problems),
        details={"name": name, "group": info.group, "kind": info.kind,
                 "causes": causes(problems)},
    )


def too_large(current: int, requested: int) -> errors.Timeout:
    """504: the client asked for a state newer than the store has."""
    return errors.Timeout(
        f"Too large resource version: {requested}, current: {current}",
        details={"causes": [{"type": "ResourceVersionTooLarge",
                             "message": "Too large resource version"}],
                 "retryAfterSeconds": 1},
    )


def expired(exc: interface.Compacted, *, continuing: bool) -> errors.Gone:
    """410: the revision (or the continue token's revision) is no longer kept."""
    if continuing:
        return errors.Gone(
            "The provided continue parameter is too old to display a consistent list result."
            " You can start a new list without the continue parameter."
        )
    return errors.Gone(f"too old resource version: {exc.requested} ({exc.oldest})")
