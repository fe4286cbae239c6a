"""The reason vocabularies have one owner: the schema enums and the node plugin use its words."""

from __future__ import annotations

from nodeplugin.materialize import interface
from openapi import reasons
from openapi import schema as schemas


def test_failure_reasons_are_the_schemas_and_the_plugins() -> None:
    models = schemas.NODE_MODEL_STORE_STATUS["properties"]["models"]["items"]["properties"]
    assert models["reason"]["enum"] == ["", *reasons.FAILURE_REASONS]
    counted = schemas.MODEL_ARTIFACT_PROGRESS["properties"]["failureReasons"]["items"]
    assert counted["properties"]["reason"]["enum"] == list(reasons.FAILURE_REASONS)
    assert interface.Reason is reasons.FailureReason
    assert reasons.FAILURE_REASONS == ("InvalidRequest", "AccessDenied", "SourceUnavailable",
                                       "IntegrityMismatch", "InsufficientCapacity", "Canceled")


def test_condition_types_per_kind() -> None:
    artifact = schemas.MODEL_ARTIFACT_STATUS["properties"]["conditions"]
    store = schemas.NODE_MODEL_STORE_STATUS["properties"]["conditions"]
    assert artifact["items"]["properties"]["type"]["enum"] == ["Resolved", "Degraded"]
    assert store["items"]["properties"]["type"]["enum"] == ["Ready", "CapacityLow"]
    pattern = artifact["items"]["properties"]["reason"]["pattern"]
    assert pattern == reasons.CONDITION_REASON_PATTERN
    assert set(reasons.RESOLVED_REASONS) >= {"Resolved", "SecretNotFound", "UnsupportedSource"}
