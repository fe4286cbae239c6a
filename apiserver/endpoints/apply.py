"""Server-side apply (``PATCH`` with ``application/apply-patch+yaml``) and the field manager of
every other write.

An apply creates the object when it does not exist (201) and otherwise merges the configuration
into it (``apiserver.registry.fieldmanager``): ``fieldManager`` is required (422), ``force``
takes conflicting fields over, anything else is kube's 409 naming each field and its manager.
The configuration is a bounded YAML or JSON object of this resource's ``apiVersion`` and kind,
without ``managedFields`` (400), pruned by ``fieldValidation`` like any body. Every other write
records its ``fieldManager``, or kube's default from the User-Agent, through ``writer``.
"""

from __future__ import annotations

import copy

from starlette import requests

from apiserver import errors
from apiserver.endpoints import body as bodies
from apiserver.endpoints import patch, request
from apiserver.registry import meta, options, store
from apiserver.registry.fieldmanager import managed, tracking
from apiserver.request import info as infos
from openapi import fields, wire

APPLY_PATCH = patch.APPLY_PATCH
_CREATE_ATTEMPTS = 3



def writer(req: requests.Request, wo: request.WriteOptions, *,
           status: bool) -> tracking.Writer:
    """Who a write of this request records: ``fieldManager`` or the User-Agent's prefix."""
    return tracking.Writer(
        manager=tracking.manager_of(wo.field_manager, req.headers.get("user-agent", "")),
        subresource="status" if status else "")


def check_patch_options(wo: request.WriteOptions, *, is_apply: bool) -> None:
    """kube's PatchOptions rules: an apply names its manager; only an apply may force."""
    if is_apply and not wo.field_manager:
        raise options.invalid("PatchOptions", [
            fields.required("fieldManager", "is required for apply patch")])
    if not is_apply and wo.force:
        raise options.invalid("PatchOptions", [
            fields.forbidden("force", "may not be specified for non-apply patch")])


async def configuration(resource: store.ResourceStore, body: bytes, mode: str,
                        limits: bodies.Limits) -> tuple[wire.Obj, list[str]]:
    """The applied configuration, checked and pruned, and its unknown-field warnings."""
    decoded = await bodies.decode(body, "application/yaml", limits)
    config = decoded.document
    info = resource.info
    api_version = config.get("apiVersion")
    if api_version != info.group_version:
        raise errors.BadRequest(
            "Incorrect version specified in apply patch. Specified patch version:"
            f" {fields.shown(api_version or '')}, expected: {info.group_version}")
    kind = config.get("kind")
    if kind != info.kind:
        raise errors.BadRequest(
            f"the kind in the data ({fields.shown(kind or '')}) does not match the expected"
            f" kind ({info.kind})")
    metadata = config.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise errors.BadRequest("metadata must be an object")
    if isinstance(metadata, dict) and metadata.get("managedFields") is not None:
        raise errors.BadRequest("metadata.managedFields must be nil")
    warnings = request.unknown_fields(info.kind, config, mode)
    return config, warnings


async def apply(resource: store.ResourceStore, req: requests.Request, found: infos.RequestInfo,
                wo: request.WriteOptions, body: bytes, limits: bodies.Limits, *,
                status: bool) -> tuple[wire.Obj, bool, list[str]]:
    """Apply the body to ``found``'s object: (the result, whether it was created, warnings)."""
    check_patch_options(wo, is_apply=True)
    config, warnings = await configuration(resource, body, wo.field_validation, limits)
    info = resource.info
    namespace, name = found.namespace, found.name
    metadata = config.setdefault("metadata", {})
    given = metadata.get("name")
    if given not in (None, "", name):
        raise errors.BadRequest(
            f"the name of the object ({fields.shown(given)}) does not match the name on the URL"
            f" ({fields.shown(name)})")
    metadata["name"] = name
    subresource = "status" if status else ""
    force = bool(wo.force)

    def merged(current: wire.Obj | None) -> wire.Obj:
        entries = managed.decode_or_empty(
            (current or {}).get("metadata", {}).get("managedFields"))
        result, entries = managed.apply(
            info.kind, entries, current, copy.deepcopy(config), manager=wo.field_manager,
            subresource=subresource, force=force, api_version=info.group_version,
            now=meta.now())
        encoded = managed.encode(entries)
        result.setdefault("metadata", {})
        if encoded:
            result["metadata"]["managedFields"] = encoded
        else:
            result["metadata"].pop("managedFields", None)
        return result

    with tracking.writing(tracking.Writer(wo.field_manager, subresource, apply=True)):
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                updated = await resource.modify(namespace, name, merged, status=status,
                                                dry_run=wo.dry_run, pruned=True)
                return updated, False, warnings
            except errors.NotFound:
                if status:
                    raise
            try:
                created = await resource.create(merged(None), namespace=namespace,
                                                dry_run=wo.dry_run, from_body=True)
                return created, True, warnings
            except errors.AlreadyExists:
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
    raise errors.InternalError("the object kept vanishing and reappearing")  # pragma: no cover
