"""Fixtures for the node plugin's unit tests (the fakes live in ``fakes.py``)."""

from __future__ import annotations

import pytest

from tests.unit.nodeplugin import fakes


@pytest.fixture
def fake_mounter() -> fakes.FakeMounter:
    return fakes.FakeMounter()
