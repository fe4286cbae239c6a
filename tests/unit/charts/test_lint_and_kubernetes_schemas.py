"""helm lint --strict, and every rendered object valid against the Kubernetes OpenAPI schemas of
the oldest and newest versions we support (strict: unknown fields are errors)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from devkit import helm

VERSIONS = ("1.27.0", "1.33.0")
CRD_GROUPS = ("monitoring.coreos.com/",)
"""Kinds from a CRD the chart may render (the PrometheusRule): not in the Kubernetes schemas."""


@pytest.mark.parametrize("values", [[], [helm.FULL_VALUES]], ids=["defaults", "full"])
def test_helm_lint_strict(values: list[Any]) -> None:
    args = ["lint", "--strict", str(helm.CHART), "--namespace", helm.NAMESPACE]
    for path in values:
        args += ["--values", str(path)]
    result = helm.run(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_objects_match_the_kubernetes_schemas(
    version: str, default_docs: list[dict[str, Any]], full_docs: list[dict[str, Any]]
) -> None:
    for doc in [*default_docs, *full_docs]:
        if doc["apiVersion"].startswith(CRD_GROUPS):
            continue  # no schema in Kubernetes' OpenAPI; test_monitoring.py checks its shape
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_refuses_a_broken_object(default_docs: list[dict[str, Any]]) -> None:
    broken = dict(helm.one(default_docs, "CSIDriver"))
    broken["spec"] = {**broken["spec"], "podInfoOnMount": "yes"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)
    api = dict(helm.one(default_docs, "APIService"))
    api["spec"] = {**api["spec"], "caBundel": "x"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(api, VERSIONS[-1], strict=True)
