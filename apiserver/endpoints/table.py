"""Table and PartialObjectMetadata renderings (what kubectl and the metadata client ask for)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from openapi import columns, resources, wire


def partial(obj: wire.Obj, api_version: str) -> wire.Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version,
            "metadata": obj.get("metadata") or {}}


def metadata_list(objs: Iterable[wire.Obj], api_version: str, list_meta: wire.Obj) -> wire.Obj:
    return {"kind": "PartialObjectMetadataList", "apiVersion": api_version,
            "metadata": list_meta, "items": [partial(obj, api_version) for obj in objs]}


def _row(kind: str, obj: wire.Obj, include: str, api_version: str,
         now: datetime.datetime) -> wire.Obj:
    embedded: wire.Obj | None
    if include == "Object":
        embedded = obj
    elif include == "Metadata":
        embedded = partial(obj, api_version)
    else:
        embedded = None
    return {"cells": columns.cells(kind, obj, now), "object": embedded}


def render(info: resources.ResourceInfo, objs: Iterable[wire.Obj], *, api_version: str,
           include: str, list_meta: wire.Obj, with_columns: bool = True) -> wire.Obj:
    """A ``meta.k8s.io`` Table; ``with_columns=False`` leaves the definitions out (watch rows
    after the first)."""
    now = datetime.datetime.now(datetime.UTC)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta,
        "columnDefinitions": list(columns.columns(info.kind)) if with_columns else [],
        "rows": [_row(info.kind, obj, include, api_version, now) for obj in objs],
    }
