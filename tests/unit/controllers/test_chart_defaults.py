"""The controllers' defaults agree with what the Helm chart deploys: the plugin Pods the
progress view looks for carry the labels of the chart's DaemonSet, and the settings ConfigMap
it reads is the chart's (rendered with the real Helm binary)."""

from __future__ import annotations

from controllers import config as settings
from devkit import chartrbac


def _flag(args: list[str], name: str) -> str | None:
    for arg in args:
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


def test_the_default_plugin_selector_finds_the_charts_plugin_pods() -> None:
    chart = chartrbac.render()
    args = chart.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    selector = _flag(args, "--plugin-pod-selector") or settings.DEFAULT_PLUGIN_SELECTOR
    labels = chart.plugin_labels
    for requirement in selector.split(","):
        key, _, value = requirement.partition("=")
        assert labels.get(key) == value, (requirement, labels)
    server_labels = chart.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert not all(server_labels.get(k) == v for k, _, v in
                   (r.partition("=") for r in selector.split(","))), "matches the server too"


def test_the_default_settings_configmap_is_the_charts() -> None:
    chart = chartrbac.render()
    args = chart.one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    named = _flag(args, "--settings-configmap") or settings.DEFAULT_SETTINGS_CONFIGMAP
    assert named == chart.settings_configmap
