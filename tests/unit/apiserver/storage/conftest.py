"""Storage fixtures: a fresh etcd member per test (in the test's own directory)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.support import etcd


@pytest.fixture
def etcd_server(tmp_path: pathlib.Path) -> Iterator[etcd.Etcd]:
    with etcd.running(tmp_path / "etcd") as member:
        yield member
