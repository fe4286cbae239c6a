"""The controllers' flags and the settings ConfigMap's values."""

from __future__ import annotations

import argparse

import pytest

from controllers import config as settings
from controllers.resolver import settings as clustersettings
from hub import config as hub_config


@pytest.mark.parametrize(("text", "seconds"), [("24h", 86400), ("1h30m", 5400), ("90s", 90),
                                               ("500ms", 0.5), ("1.5m", 90)])
def test_durations(text: str, seconds: float) -> None:
    assert settings.duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "1d", "-5m", "0s", "5m3"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        settings.duration(text)


def test_the_interval_floor_is_a_minute() -> None:
    assert settings.interval("1m") == 60
    with pytest.raises(argparse.ArgumentTypeError, match="1m minimum"):
        settings.interval("59s")


def test_flags_fill_the_hub_settings() -> None:
    p = argparse.ArgumentParser()
    settings.add_flags(p)
    args = p.parse_args(["--huggingface-endpoint", "https://mirror.example", "--https-proxy",
                         "http://proxy:3128", "--no-proxy", "10.0.0.0/8",
                         "--revalidate-interval", "2h"])
    hub = settings.hub_from(args)
    assert (hub.huggingface_endpoint, hub.https_proxy, hub.no_proxy) == (
        "https://mirror.example", "http://proxy:3128", "10.0.0.0/8")
    assert args.revalidate_interval == 7200 and hub.ca_bundle is None


def test_configmap_values_override_and_bad_ones_are_refused() -> None:
    base = hub_config.HubConfig()
    config, every = clustersettings.effective(
        {"model-artifact-modelscope-endpoint": "https://ms.example",
         "model-artifact-no-proxy": " ", "model-artifact-revalidate-interval": "12h"},
        base, 86400, None)
    assert config.modelscope_endpoint == "https://ms.example" and config.no_proxy == ""
    assert every == 12 * 3600
    for data, why in (({"model-artifact-huggingface-endpoint": "ftp://x"}, "hub settings"),
                      ({"model-artifact-revalidate-interval": "30s"}, "at least 1m"),
                      ({"model-artifact-revalidate-interval": "soon"}, "revalidate-interval"),
                      ({"model-artifact-ca-bundle": "missing"}, "ca-bundle")):
        with pytest.raises(clustersettings.Invalid, match=why):
            clustersettings.effective(data, base, 86400, None)
