"""Finding a node's plugin (static URLs, plugin Pods), the token it is asked with, and reading
its downloads answer."""

from __future__ import annotations

import asyncio
import logging
import pathlib
from typing import Any

import pytest

from controllers.runtime import client as clients
from controllers.runtime import informer
from controllers.sources import plugins
from devkit import clock as manual
from openapi import plugin as plugin_api
from tests.unit.controllers.fakes import Listed


def test_parse_downloads_keeps_well_formed_entries() -> None:
    body = (b'{"downloads":[{"digest":"sha256:aa","downloadedBytes":5,"sizeBytes":9,'
            b'"source":"Hub"},{"digest":3},{"digest":"sha256:bb","downloadedBytes":true}]}')
    assert plugins.parse_downloads(body) == {"sha256:aa": 5}
    with pytest.raises(ValueError):
        plugins.parse_downloads(b'{"nothing": []}')


def test_static_plugins() -> None:
    found = plugins.StaticPlugins({"n1": "https://127.0.0.1:32444/", "n2": ""})
    assert found.url("n1") == "https://127.0.0.1:32444"
    assert found.url("n2") is None and found.url("n3") is None


def _pod(name: str, node: str, ip: str, *, phase: str = "Running",
         ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"namespace": "gpustack-system", "name": name, "resourceVersion": "1"},
            "spec": {"nodeName": node},
            "status": {"phase": phase, "podIP": ip,
                       "conditions": [{"type": "Ready", "status": ready}]}}


async def test_plugin_pods_give_the_ready_pod_on_the_node() -> None:
    api = Listed([_pod("p1", "n1", "10.0.0.1"), _pod("p2", "n2", "10.0.0.2", ready="False"),
                  _pod("p3", "n3", "fd00::3"), _pod("p4", "n4", "10.0.0.4", phase="Pending")])
    pods = informer.Informer(api, clients.PODS, manual.ManualClock())
    located = plugins.PodPlugins(pods, 32444)
    task = asyncio.create_task(pods.run())
    await pods.synced.wait()
    assert located.url("n1") == "https://10.0.0.1:32444"
    assert located.url("n2") is None and located.url("n4") is None
    assert located.url("n3") == "https://[fd00::3]:32444"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _project(directory: pathlib.Path, generation: str, token: str) -> None:
    """Write ``token`` as kubelet's projected volume does: a new timestamped directory, then
    ``..data`` swapped to it in one rename; ``token`` links through ``..data``."""
    (directory / generation).mkdir()
    (directory / generation / "token").write_text(token)
    (directory / "..data_tmp").symlink_to(generation)
    (directory / "..data_tmp").replace(directory / "..data")
    if not (directory / "token").is_symlink():
        (directory / "token").symlink_to("..data/token")


async def test_the_plugin_token_is_the_projected_file_read_again_as_kubelet_rotates_it(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    _project(tmp_path, "..2026_12_06_10_00_00.1", "plugin-audience-token-1")
    read = plugins.token_file(str(tmp_path / "token"))
    assert await read() == "plugin-audience-token-1"
    _project(tmp_path, "..2026_12_06_10_08_00.2", "plugin-audience-token-2\n")
    assert await read() == "plugin-audience-token-2"
    # unreadable: no token at all (the plugins answer 401), said once, never another credential
    (tmp_path / "..data").unlink()
    with caplog.at_level(logging.WARNING, logger=plugins.__name__):
        assert await read() is None
        assert await read() is None
    warned = [r.getMessage() for r in caplog.records if r.name == plugins.__name__]
    assert len(warned) == 1 and plugin_api.AUDIENCE in warned[0]
    assert "plugin-audience-token" not in warned[0]
    _project(tmp_path, "..2026_12_06_10_16_00.3", "plugin-audience-token-3")
    assert await read() == "plugin-audience-token-3"
