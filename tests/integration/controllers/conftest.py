"""Fixtures for the controllers' integration tests."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.integration.nodeplugin import csi_harness


@pytest.fixture
def mount_guard(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    try:
        yield tmp_path
    finally:
        csi_harness.unmount_all_under(tmp_path)
