"""Finding a node's plugin (static URLs, plugin Pods) and reading its downloads answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controllers.runtime import client as clients
from controllers.runtime import informer
from controllers.sources import plugins
from devkit import clock as manual
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
