"""Render the chart once per session with the default values and with ci/full-values.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from devkit import helm


@pytest.fixture(scope="session")
def default_docs() -> list[dict[str, Any]]:
    return helm.template().docs()


@pytest.fixture(scope="session")
def full_docs() -> list[dict[str, Any]]:
    return helm.template(values=[helm.FULL_VALUES]).docs()
