"""Fixtures for integration tests: a real standalone API server over TLS on loopback."""

from __future__ import annotations

import pathlib
from collections.abc import Generator, Iterator

import pytest

from devkit.controlplane import ControlPlane
from devkit.harness import apiserver as support


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    """One server per test module (tests in a module use distinct names or namespaces)."""
    with support.running(tmp_path_factory.mktemp("apiserver")) as server:
        yield server


@pytest.fixture
def fresh_apiserver(tmp_path: pathlib.Path) -> Iterator[support.RunningServer]:
    """A server of its own for tests that restart, kill or otherwise disturb it."""
    with support.running(tmp_path / "apiserver") as server:
        yield server


@pytest.fixture
def control_plane(tmp_path: pathlib.Path) -> Iterator[ControlPlane]:
    """A fixture kube-apiserver of the test's own (loopback HTTPS, background thread)."""
    with ControlPlane(tmp_path / "controlplane") as plane:
        yield plane


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the server log to a failing test's report."""
    report = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, support.RunningServer):
                report.sections.append(("apiserver log", value.log()[-20000:]))
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.integration)
