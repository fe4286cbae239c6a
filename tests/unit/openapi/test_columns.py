"""Printer columns and cells, Age rendered the way kubectl renders it."""

import datetime
from typing import Any

import pytest

from openapi import columns

NOW = datetime.datetime(2026, 9, 26, 12, 0, 0, tzinfo=datetime.UTC)
DIGEST = "sha256:" + "a" * 64


def created(seconds_ago: int) -> dict[str, Any]:
    stamp = (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"name": "x", "namespace": "a", "creationTimestamp": stamp}


def test_model_artifact_columns() -> None:
    defs = columns.columns("ModelArtifact")
    assert [(c["name"], c["priority"]) for c in defs] == [
        ("Name", 0), ("Source", 0), ("Revision", 0), ("Size", 0), ("Ready", 0),
        ("Downloading", 0), ("Resolved", 0), ("Age", 1)]
    assert defs[0]["format"] == "name"
    assert defs[-1]["type"] == "date"
    assert all(c["description"] for c in defs)


def test_node_model_store_columns() -> None:
    defs = columns.columns("NodeModelStore")
    assert [(c["name"], c["priority"]) for c in defs] == [
        ("Name", 0), ("Ready", 0), ("Used", 0), ("Models", 0), ("Downloading", 0), ("Age", 1)]


def test_columns_are_copies() -> None:
    columns.columns("ModelArtifact")[0]["name"] = "Changed"
    assert columns.columns("ModelArtifact")[0]["name"] == "Name"


def test_resolved_hub_artifact_row() -> None:
    obj = {
        "metadata": created(300),
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2.5-7B-Instruct"}}},
        "status": {
            "resolved": {"revision": "7ae557604adf67be50417f59c2c2f167def9a775",
                         "sizeBytes": 999604126, "manifestDigest": DIGEST},
            "nodes": {"ready": 3, "downloading": 1, "failed": 0, "downloadingPercent": 45},
            "conditions": [{"type": "Degraded", "status": "False"},
                           {"type": "Resolved", "status": "True"}],
        },
    }
    assert columns.cells("ModelArtifact", obj, NOW) == [
        "x", "Qwen/Qwen2.5-7B-Instruct", "7ae557604adf", "953.3MiB", 3, "1 (45%)", "True", "5m"]


def test_unresolved_claim_and_image_rows() -> None:
    claim = {"metadata": created(30),
             "spec": {"source": {"persistentVolumeClaim": {"claimName": "models"}}}}
    assert columns.cells("ModelArtifact", claim, NOW) == [
        "x", "claim/models", None, None, None, None, None, "30s"]
    image = {"metadata": created(0),
             "spec": {"source": {"image": {"reference": "r.example/q@" + DIGEST}}},
             "status": {"resolved": {"resolvedTime": "2026-09-26T12:00:00Z"},
                        "conditions": [{"type": "Resolved", "status": "False"}]}}
    assert columns.cells("ModelArtifact", image, NOW)[1:] == [
        "r.example/q@" + DIGEST, None, None, None, None, "False", "0s"]
    scope = {"metadata": created(0), "spec": {"source": {"modelScope": {"repository": "m/n"}}},
             "status": {"nodes": {"ready": 0, "downloading": 0, "failed": 0}}}
    assert columns.cells("ModelArtifact", scope, NOW)[1:7] == ["m/n", None, None, 0, "0", None]


def test_node_model_store_row() -> None:
    obj = {
        "metadata": {"name": "gpu-node-01", "creationTimestamp": "2026-09-24T08:00:00Z"},
        "status": {
            "capacity": {"usedPercent": 40},
            "models": [{"digest": DIGEST, "state": "Ready"},
                       {"digest": "sha256:" + "b" * 64, "state": "Downloading"},
                       {"digest": "sha256:" + "c" * 64, "state": "Failed"}],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    assert columns.cells("NodeModelStore", obj, NOW) == [
        "gpu-node-01", "True", "40%", 3, 1, "2d4h"]
    empty = {"metadata": {"name": "n"}}
    assert columns.cells("NodeModelStore", empty, NOW) == ["n", None, None, 0, 0, "<unknown>"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"),
        (125, "2m5s"), (599, "9m59s"), (600, "10m"), (10799, "179m"), (10800, "3h"),
        (3 * 3600 + 60 * 7, "3h7m"), (8 * 3600 - 1, "7h59m"), (8 * 3600, "8h"),
        (47 * 3600 + 3599, "47h"), (48 * 3600, "2d"), (52 * 3600, "2d4h"),
        (8 * 86400 - 1, "7d23h"), (8 * 86400, "8d"), (729 * 86400, "729d"),
        (730 * 86400, "2y"), (741 * 86400, "2y11d"), (8 * 365 * 86400, "8y"),
        (20 * 365 * 86400, "20y"),
    ],
)
def test_human_duration_follows_kubectl(seconds: int, text: str) -> None:
    assert columns.human_duration(seconds) == text


def test_age_tolerates_naive_now_and_fractional_timestamps() -> None:
    obj = {"metadata": {"name": "x", "creationTimestamp": "2026-09-26T11:59:00.5Z"}}
    naive = NOW.replace(tzinfo=None)
    assert columns.cells("NodeModelStore", obj, naive)[-1] == "59s"
    obj["metadata"]["creationTimestamp"] = "garbage"
    assert columns.cells("NodeModelStore", obj, NOW)[-1] == "<unknown>"


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0B"), (1023, "1023B"), (1024, "1.0KiB"), (1536, "1.5KiB"),
     (15231233024, "14.2GiB"), (145424101604, "135.4GiB"), (2**50 * 3, "3.0PiB"),
     (None, None), (-1, None), (True, None)],
)
def test_human_size(size: object, text: str | None) -> None:
    assert columns.human_size(size) == text
