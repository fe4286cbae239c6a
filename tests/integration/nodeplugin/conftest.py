"""Fixtures for the CSI plugin's integration tests (also for the download tests here).

- ``mount_guard``: a temporary directory; at teardown every mount below it is lazily unmounted,
  read from ``/proc/self/mountinfo``, even when the test failed.
- ``start_plugin(api, import_dir=..., extra_args=...)``: runs ``python -m nodeplugin`` against
  ``api`` (a ``RunningServer`` or a kubeconfig path) with its root and kubelet dir under the
  guard; returns a ``csi_harness.PluginProcess`` (``.kubelet()``, ``.restart()``, ``.kill()``,
  ``.log()``).
- ``artifacts``: a ``csi_harness.ArtifactApi`` over the module's API server: ``create`` then
  ``resolve`` (the status PUT as the worker), or ``resolved`` for both.
- ``drivers``: the download driver processes a crash test starts (``download_driver.Driver``),
  killed at teardown.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Generator, Iterator, Sequence

import pytest

from devkit.harness import apiserver as support
from tests.integration.nodeplugin import csi_harness
from tests.integration.nodeplugin.csi_harness import ArtifactApi, PluginProcess
from tests.integration.nodeplugin.download_driver import Driver

if os.geteuid() != 0:  # bind mounts need root; CI runs these as root
    pytest.skip("the CSI integration tests need root", allow_module_level=True)


@pytest.fixture
def mount_guard(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    try:
        yield tmp_path
    finally:
        csi_harness.unmount_all_under(tmp_path)


@pytest.fixture
def start_plugin(
    mount_guard: pathlib.Path,
) -> Iterator[Callable[..., PluginProcess]]:
    started: list[PluginProcess] = []

    def start(
        api: support.RunningServer | pathlib.Path,
        *,
        import_dir: pathlib.Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> PluginProcess:
        kubeconfig = api.kubeconfig if isinstance(api, support.RunningServer) else api
        plugin = PluginProcess(mount_guard / f"plugin{len(started)}", kubeconfig,
                               import_dir=import_dir, extra_args=extra_args)
        started.append(plugin)
        plugin.start()
        return plugin

    try:
        yield start
    finally:
        for plugin in started:
            plugin.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the plugin logs to a failing test's report."""
    report = yield
    if report.failed:
        guard = getattr(item, "funcargs", {}).get("mount_guard")
        if isinstance(guard, pathlib.Path):
            for log in sorted(guard.glob("plugin*/plugin.log")):
                report.sections.append((f"{log.parent.name} log",
                                        log.read_text(errors="replace")[-20000:]))
    return report


@pytest.fixture(scope="module")
def artifacts(apiserver: support.RunningServer) -> ArtifactApi:
    return ArtifactApi(apiserver)


@pytest.fixture
def drivers() -> Iterator[list[Driver]]:
    started: list[Driver] = []
    try:
        yield started
    finally:
        for d in started:
            d.kill()
