"""The chart's node-store settings are the contract's: every default and bound of a
``settings.model-store-*`` or hub-endpoint key in values.schema.json, values.yaml and the rendered
ConfigMap equals the NodeModelStore schema's (``openapi.nodestore``), which the controllers merge
the ConfigMap by. The chart cannot import Python, so a drift fails here naming the key and the
spec field (issue 20)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import yaml

from controllers.nodestores import settings as storesettings
from devkit import helm
from openapi import nodestore, quantity


def _drift(schema: dict[str, Any], values: dict[str, Any],
           rendered: dict[str, str]) -> list[str]:
    """One sentence per chart value that disagrees with the contract."""
    problems: list[str] = []
    declared = schema["properties"]["settings"]["properties"]
    for key, setting in storesettings.CONTRACT.items():
        where = f"settings.{key} ({setting.path})"
        entry = declared.get(key)
        if entry is None:
            problems.append(f"{where}: not in values.schema.json")
            continue
        seeds = {"values.schema.json default": entry.get("default"),
                 "values.yaml": values["settings"].get(key),
                 "the rendered ConfigMap": rendered.get(key)}
        if isinstance(setting, nodestore.Bounded):
            for bound in ("minimum", "maximum"):
                if entry.get(bound) != getattr(setting, bound):
                    problems.append(f"{where}: values.schema.json {bound} {entry.get(bound)!r}, "
                                    f"the contract's is {getattr(setting, bound)!r}")
            wanted: Any = setting.default
            seeds = {name: int(seed) if isinstance(seed, str) and seed.isdigit() else seed
                     for name, seed in seeds.items()}
        elif isinstance(setting, nodestore.AtLeast):
            # A quantity string in the chart (200Mi); the contract counts bytes.
            wanted = setting.default
            seeds = {name: _bytes(seed) for name, seed in seeds.items()}
            pattern = entry.get("pattern", "")
            if setting.minimum >= 0 and re.fullmatch(pattern, "-1"):
                problems.append(f"{where}: values.schema.json admits a negative value")
        else:
            wanted = setting.default
        for name, seed in seeds.items():
            if seed != wanted:
                problems.append(f"{where}: {name} {seed!r}, the contract's default is {wanted!r}")
    return problems


def _bytes(seed: object) -> object:
    try:
        return quantity.to_bytes(str(seed))
    except quantity.QuantityError:
        return seed


def _chart(default_docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any],
                                                          dict[str, str]]:
    schema = json.loads((helm.CHART / "values.schema.json").read_text())
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    rendered: dict[str, str] = helm.one(default_docs, "ConfigMap")["data"]
    return schema, values, rendered


def test_the_chart_s_node_store_settings_are_the_contract_s(
    default_docs: list[dict[str, Any]],
) -> None:
    assert _drift(*_chart(default_docs)) == []


def test_a_drift_names_the_key_and_the_field(default_docs: list[dict[str, Any]]) -> None:
    schema, values, rendered = _chart(default_docs)
    moved = copy.deepcopy(schema)
    declared = moved["properties"]["settings"]["properties"]
    high, concurrency = nodestore.HIGH_PERCENT, nodestore.CONCURRENCY
    declared[storesettings.CONCURRENCY]["maximum"] = concurrency.maximum + 1
    declared[storesettings.HIGH]["default"] = high.default + 1
    declared[storesettings.BANDWIDTH]["default"] = "1Mi"
    del declared[storesettings.LOW]
    assert _drift(moved, values, rendered) == [
        f"settings.model-store-high-watermark (spec.watermarks.highPercent): values.schema.json "
        f"default {high.default + 1}, the contract's default is {high.default}",
        "settings.model-store-low-watermark (spec.watermarks.lowPercent): not in "
        "values.schema.json",
        "settings.model-store-download-concurrency (spec.download.concurrency): "
        f"values.schema.json maximum {concurrency.maximum + 1}, the contract's is "
        f"{concurrency.maximum}",
        "settings.model-store-download-bandwidth (spec.download.bytesPerSecond): "
        f"values.schema.json default 1048576, the contract's default is "
        f"{nodestore.BYTES_PER_SECOND.default}",
    ]
    stale = copy.deepcopy(values)
    stale["settings"]["model-artifact-huggingface-endpoint"] = "https://hf.example"
    assert _drift(schema, stale, rendered) == [
        "settings.model-artifact-huggingface-endpoint (spec.hub.huggingFaceEndpoint): values.yaml "
        f"'https://hf.example', the contract's default is "
        f"{nodestore.HUGGING_FACE_ENDPOINT.default!r}",
    ]
