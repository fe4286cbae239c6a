"""The Status errors the registry raises, worded and detailed as kube-apiserver does, and the one
mapping of storage errors to them (``from_storage``): the store, the watch stream, the app's
handler for a storage error raised outside the registry, and the server's own leases all ask it.

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
    return [{"reason": p.type, "message": p.message, "field": p.field}
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


def too_large(current: int, requested: int, *, retry_after: int = 0) -> errors.Timeout:
    """504: the client asked for a state newer than the store has, worded as kube-apiserver
    1.36 words it (tests/data/kube-samples/resource-version-too-large.json): ``retry_after``
    (with its header) where the server waited for that state first, as its watch cache does."""
    details: errors.StatusDetails = {"causes": [{"reason": "ResourceVersionTooLarge",
                                                 "message": "Too large resource version"}]}
    headers = {}
    if retry_after > 0:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return errors.Timeout(
        f"Timeout: Too large resource version: {requested}, current: {current}",
        details=details, headers=headers)


def expired(exc: interface.Compacted, *, continuing: bool) -> errors.Gone:
    """410: the revision (or the continue token's revision) is no longer kept."""
    if continuing:
        return errors.Gone(
            "The provided continue parameter is too old to display a consistent list result."
            " You can start a new list without the continue parameter."
        )
    return errors.Gone(f"too old resource version: {exc.requested} ({exc.oldest})")


def from_storage(exc: interface.StorageError, info: resources.ResourceInfo | None = None,
                 name: str = "", *, continuing: bool = False, requested: int | None = None,
                 current: int | None = None) -> errors.StatusError:
    """The Status of a storage failure; the one place one is chosen.

    ``info`` and ``name``: the object a key error concerns (without them, as for the server's
    own leases, the key is named); ``continuing``: the revision was a continue token's;
    ``requested``: the revision the client asked for, when the storage reports a later cursor;
    ``current``: the store's revision, for a revision newer than it. A failure of the backend
    itself says only what happened (down, hung, broken), never more (the details go to the log).
    """
    if isinstance(exc, interface.KeyNotFound):
        return not_found(info, name) if info else errors.NotFound(str(exc))
    if isinstance(exc, interface.KeyExists):
        return exists(info, name) if info else errors.AlreadyExists(str(exc))
    if isinstance(exc, interface.RevisionConflict):
        return stale(info, name) if info else errors.Conflict(str(exc))
    if isinstance(exc, interface.Compacted):
        if requested is not None:
            exc = interface.Compacted(requested, exc.oldest)
        return expired(exc, continuing=continuing)
    if isinstance(exc, interface.FutureRevision):
        return too_large(exc.current if current is None else current, exc.requested,
                         retry_after=exc.retry_after)
    if isinstance(exc, interface.Timeout):
        return errors.Timeout(
            "Timeout: the storage did not answer within the request timeout",
            details={"retryAfterSeconds": 1}, headers={"Retry-After": "1"},
        )
    if isinstance(exc, interface.Unavailable):
        return errors.InternalError(
            "the storage is unavailable; retry later",
            details={"retryAfterSeconds": 1}, headers={"Retry-After": "1"},
        )
    return errors.InternalError("the storage failed to serve the request")
