"""Fixtures for the controllers' integration tests (the whole loop needs bind mounts: root)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest

from tests.integration.nodeplugin import csi_harness

if os.geteuid() != 0:  # bind mounts need root; CI runs these as root
    pytest.skip("the end-to-end tests need root", allow_module_level=True)


@pytest.fixture
def mount_guard(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    try:
        yield tmp_path
    finally:
        csi_harness.unmount_all_under(tmp_path)
