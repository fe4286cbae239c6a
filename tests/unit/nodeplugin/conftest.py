"""Fixtures for the node plugin's unit tests (the fakes live in ``fakes.py``)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from devkit.controlplane import ControlPlane
from tests.unit.nodeplugin import fakes


@pytest.fixture
def fake_mounter() -> fakes.FakeMounter:
    return fakes.FakeMounter()


@pytest.fixture
def control_plane(tmp_path: pathlib.Path) -> Iterator[ControlPlane]:
    """A fixture kube-apiserver of the test's own (loopback HTTPS, background thread)."""
    with ControlPlane(tmp_path / "controlplane") as plane:
        yield plane
