"""The reason vocabularies have one owner: the schema enums and the node plugin use its words."""

from __future__ import annotations

import typing

from hub import errors as hub_errors
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


def test_the_vocabulary_is_what_the_schema_serves() -> None:
    assert reasons.RESOLVED in reasons.RESOLVED_REASONS
    assert len(set(reasons.RESOLVED_REASONS)) == len(reasons.RESOLVED_REASONS)
    assert reasons.FailureReason.ACCESS_DENIED.value == reasons.ACCESS_DENIED


def test_the_hubs_reasons_are_the_contracts() -> None:
    assert hub_errors.Reason is reasons.HubReason
    assert set(typing.get_args(reasons.HubReason)) == set(reasons.HUB_REASONS)
    assert {reasons.ACCESS_DENIED, reasons.SOURCE_UNAVAILABLE, reasons.INVALID_REQUEST} <= set(
        reasons.HUB_REASONS) & set(reasons.FAILURE_REASONS)
