"""The settings ConfigMap the chart seeds is what the controllers read: every key is one they
know (or one the chart writes to report what runs), every value the schema admits passes their
checks, and a value they would refuse is refused by the schema at install."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from controllers.nodestores import settings as storesettings
from controllers.resolver import settings as clustersettings
from devkit import helm
from devkit.controlplane import Authority
from hub import config as hub_config
from openapi import install

READ_BY_THE_CONTROLLERS = {
    *storesettings.HUB_KEYS, storesettings.HIGH, storesettings.LOW, storesettings.CONCURRENCY,
    storesettings.BANDWIDTH, storesettings.CA_BUNDLE,
    install.REVALIDATE_INTERVAL,
}
# Read by no controller: it reports the chart's switch modelManager.peerSync.enabled, written
# from it at every install (test_values_schema: the peer sync setting says what the switch runs).
REPORTS_THE_SWITCH = {"model-store-peer-sync"}


def _data(docs: list[dict[str, Any]]) -> dict[str, str]:
    data: dict[str, str] = helm.one(docs, "ConfigMap", "model-manager-settings")["data"]
    return data


def _check(data: dict[str, str], tmp_path: pathlib.Path) -> None:
    """Both readers of the ConfigMap accept ``data`` with no problem."""
    base = storesettings.StoreSettings()
    merged, problems = storesettings.merge(data, base, base)
    assert problems == []
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(Authority("hub-ca").cert_pem)
    hub, interval = clustersettings.effective(
        data, hub_config.HubConfig(), 86400.0,
        str(ca_file) if data.get(storesettings.CA_BUNDLE) else None)
    assert hub.huggingface_endpoint == data[
        "model-artifact-huggingface-endpoint"] == merged.huggingface_endpoint
    assert interval >= clustersettings.MIN_INTERVAL


@pytest.mark.parametrize("values", [[], [helm.FULL_VALUES]], ids=["defaults", "full"])
def test_the_seeds_are_the_keys_the_controllers_read(
    values: list[pathlib.Path], tmp_path: pathlib.Path
) -> None:
    data = _data(helm.template(values=values).docs())
    assert set(data) == READ_BY_THE_CONTROLLERS | REPORTS_THE_SWITCH
    _check(data, tmp_path)


@pytest.mark.parametrize("setting", [
    "settings.model-store-high-watermark=95", "settings.model-store-low-watermark=1",
    "settings.model-store-download-concurrency=64", "settings.model-store-download-bandwidth=1Gi",
    "settings.model-store-download-bandwidth=128Ki",
    "settings.model-artifact-revalidate-interval=1m",
    "settings.model-artifact-revalidate-interval=1h30m",
    "settings.model-artifact-https-proxy=https://proxy.example.test:3128",
    "settings.model-artifact-no-proxy=.svc\\,10.0.0.0/8",
])  # fmt: skip
def test_edge_values_the_schema_admits_pass_the_controllers(
    setting: str, tmp_path: pathlib.Path
) -> None:
    _check(_data(helm.template(sets=[setting]).docs()), tmp_path)


def test_what_the_controllers_refuse_the_schema_refuses() -> None:
    base = storesettings.StoreSettings()
    for key, bad in ((storesettings.HIGH, "96"), (storesettings.CONCURRENCY, "0"),
                     (storesettings.BANDWIDTH, "fast")):
        _, problems = storesettings.merge({key: bad}, base, base)
        assert problems, key  # the controllers refuse it ...
        result = helm.template(sets=[f"settings.{key}={bad}"], check=False)
        assert result.returncode != 0 and f"/settings/{key}" in result.stderr  # ... so does helm
    for interval, says in (("30s", "must be at least 1m"),
                           ("60000000000ns", "/settings/model-artifact-revalidate-interval")):
        with pytest.raises(clustersettings.Invalid):
            clustersettings.effective({"model-artifact-revalidate-interval": interval},
                                      hub_config.HubConfig(), 86400.0, None)
        result = helm.template(sets=[f"settings.model-artifact-revalidate-interval={interval}"],
                               check=False)  # fmt: skip
        assert result.returncode != 0 and says in result.stderr, result.stderr
