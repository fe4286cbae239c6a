"""The node-store settings have one owner: ``openapi.nodestore`` reads each default and bound from
the NodeModelStore schema, and every consumer (the worker's settings, the plugin's flags, its
downloader and capacity ledger, the hub clients) takes them from there; one that keeps a copy of
its own fails here once the schema moves (issue 20). The chart is checked in
``tests/unit/charts/test_settings_contract.py``."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import pathlib
from typing import Any

import pytest

from controllers import config as controller_settings
from controllers.nodestores import settings as storesettings
from hub import config as hub_config
from nodeplugin import __main__ as plugin_cli
from nodeplugin.materialize import capacity, download
from openapi import nodestore, schema

REPO = pathlib.Path(__file__).resolve().parents[3]
PRODUCT = ("apiserver", "controllers", "nodeplugin", "hub", "kube", "certs")
GROUPS = ("watermarks", "download", "hub")


def _spec_field(path: str) -> dict[str, Any]:
    _, group, name = path.split(".")
    found: dict[str, Any] = schema.NODE_MODEL_STORE_SPEC["properties"][group]["properties"][name]
    return found


def test_every_default_and_bound_of_the_settings_is_the_schema_s() -> None:
    paths = {setting.path for setting in nodestore.SETTINGS}
    defaulted = {f"spec.{group}.{name}"
                 for group in GROUPS
                 for name, field in schema.NODE_MODEL_STORE_SPEC["properties"][group][
                     "properties"].items()
                 if "default" in field}
    assert paths == defaulted
    for setting in nodestore.SETTINGS:
        field = _spec_field(setting.path)
        kept = {key: field[key] for key in ("default", "minimum", "maximum") if key in field}
        assert dataclasses.asdict(setting) == {"path": setting.path, **kept}, setting.path


def test_the_worker_s_settings_take_the_contract_s() -> None:
    base = storesettings.StoreSettings()
    spec = base.spec()
    for setting in nodestore.SETTINGS:
        _, group, name = setting.path.split(".")
        assert spec[group][name] == setting.default, setting.path
    for key, setting in storesettings.CONTRACT.items():
        if not isinstance(setting, nodestore.Bounded):
            continue
        for value, accepted in ((setting.minimum, True), (setting.maximum, True),
                                (setting.minimum - 1, False), (setting.maximum + 1, False)):
            # the two watermarks also bound each other: test each against a roomy partner
            partner = ({storesettings.LOW: "1"} if key == storesettings.HIGH else
                       {storesettings.HIGH: "95"} if key == storesettings.LOW else {})
            _, problems = storesettings.merge({key: str(value), **partner}, base, base)
            assert (problems == []) is accepted, (key, value, problems)
    assert set(storesettings.CONTRACT.values()) == set(nodestore.SETTINGS)


def test_the_hub_clients_and_the_server_flags_take_the_contract_s_endpoints() -> None:
    config = hub_config.HubConfig()
    assert config.huggingface_endpoint == nodestore.HUGGING_FACE_ENDPOINT.default
    assert config.modelscope_endpoint == nodestore.MODEL_SCOPE_ENDPOINT.default
    parser = argparse.ArgumentParser()
    controller_settings.add_flags(parser)
    hub = controller_settings.hub_from(parser.parse_args([]))
    assert (hub.huggingface_endpoint, hub.modelscope_endpoint) == (
        nodestore.HUGGING_FACE_ENDPOINT.default, nodestore.MODEL_SCOPE_ENDPOINT.default)


def test_the_node_plugin_s_start_up_flags_take_the_contract_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HF_ENDPOINT", "MODELSCOPE_ENDPOINT", "DOWNLOAD_CONCURRENCY",
                 "DOWNLOAD_BYTES_PER_SECOND", "HIGH_WATERMARK_PERCENT"):
        monkeypatch.delenv(name, raising=False)
    base = ["--node-name", "n1"]
    config = plugin_cli.config_from(plugin_cli.parser().parse_args(base))
    assert (config.hub.huggingface_endpoint, config.hub.modelscope_endpoint) == (
        nodestore.HUGGING_FACE_ENDPOINT.default, nodestore.MODEL_SCOPE_ENDPOINT.default)
    assert (config.download.concurrency, config.download.bytes_per_second,
            config.download.high_percent) == (
        nodestore.CONCURRENCY.default, nodestore.BYTES_PER_SECOND.default,
        nodestore.HIGH_PERCENT.default)
    for flag, setting in (("--download-concurrency", nodestore.CONCURRENCY),
                          ("--high-watermark", nodestore.HIGH_PERCENT)):
        for value in (setting.minimum, setting.maximum):
            plugin_cli.parser().parse_args([*base, flag, str(value)])
        for value in (setting.minimum - 1, setting.maximum + 1):
            with pytest.raises(SystemExit):
                plugin_cli.parser().parse_args([*base, flag, str(value)])
    with pytest.raises(SystemExit):
        plugin_cli.parser().parse_args(
            [*base, "--download-bytes-per-second", str(nodestore.BYTES_PER_SECOND.minimum - 1)])


def test_the_downloader_and_the_ledger_take_the_contract_s() -> None:
    settings = download.Settings()
    assert (settings.concurrency, settings.bytes_per_second, settings.high_percent) == (
        nodestore.CONCURRENCY.default, nodestore.BYTES_PER_SECOND.default,
        nodestore.HIGH_PERCENT.default)
    assert nodestore.CONCURRENCY.maximum == download.MAX_CONCURRENCY
    assert capacity.Capacity("/").high_percent == nodestore.HIGH_PERCENT.default


def _endpoint_literals(path: pathlib.Path) -> list[tuple[int, str]]:
    endpoints = {nodestore.HUGGING_FACE_ENDPOINT.default, nodestore.MODEL_SCOPE_ENDPOINT.default}
    tree = ast.parse(path.read_text(), str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in endpoints]


def test_no_second_copy_of_a_default_endpoint() -> None:
    scanned = [path for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))
               if "/gen/" not in str(path)]
    assert len(scanned) > 100
    found = [f"{path.relative_to(REPO)}:{line}: {value!r}"
             for path in scanned for line, value in _endpoint_literals(path)]
    assert found == [], "take the default endpoints from openapi.nodestore:\n" + "\n".join(found)
