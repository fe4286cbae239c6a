"""The rules every kind shares (the schema) and the NodeModelStore's cross-field rule."""

from __future__ import annotations

from collections.abc import Sequence

from apiserver.registry import strategy
from openapi import fields, nodestore, resources, validation


class Schema:
    """Types, bounds, patterns, enums and list keys of ``openapi.schema``: every write."""

    name = "Schema"

    def handles(self, write: strategy.Write) -> bool:
        return True

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        return validation.validate(write.info.kind, write.obj)


class Watermarks:
    """A NodeModelStore's low watermark is below its high one (``openapi.nodestore`` owns it)."""

    name = "NodeStoreWatermarks"

    def handles(self, write: strategy.Write) -> bool:
        return write.info.kind == resources.NODE_MODEL_STORE.kind

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        return nodestore.watermark_errors(write.obj)
