"""The plugin's own NodeModelStore: waiting for it, applying its spec all or nothing, following its
CA ConfigMap, and ignoring status-only changes (its own writes among them)."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from certs import authority
from hub import config as hub_config
from nodeplugin.cache import layout
from nodeplugin.materialize import capacity, download, interface
from nodeplugin.nodestore import apply, gate, source
from tests.unit.nodeplugin import fakes

NAMESPACE = "gpustack-system"
DIGEST = "sha256:" + "cd" * 32


class Node:
    def __init__(self, root: pathlib.Path) -> None:
        self.cache = layout.Layout(root / "cache")
        self.cache.create()
        (root / "kubelet" / "pods").mkdir(parents=True)
        self.api = fakes.FakeStoreApi()
        self.hub = download.HubMaterializer.from_config(self.cache, hub_config.HubConfig())
        self.gate = gate.Gate(self.hub, self.cache)
        self.ledger = capacity.Capacity(self.cache.root, high_percent=80)
        self.state = apply.NodeState()
        self.applied = 0
        self.notified = 0
        self.applier = apply.Applier(
            self.cache, gate=self.gate, ledger=self.ledger, kubelet_dir=str(root / "kubelet"),
            state=self.state, namespace=NAMESPACE, notify=self._notified, applied=self._applied,
        )  # fmt: skip
        self.source = source.Source(self.api, node="node-1", namespace=NAMESPACE,
                                    changed=self.applier.changed, retry_initial=0.01)

    def _notified(self) -> None:
        self.notified += 1

    async def _applied(self) -> None:
        self.applied += 1

    async def ensure(self) -> interface.Progress:
        return await self.gate.ensure(interface.Request(
            DIGEST, interface.Source("huggingFace", "org/m", "c" * 40)))


@contextlib.asynccontextmanager
async def running(tmp_path: pathlib.Path) -> AsyncIterator[Node]:
    node = Node(tmp_path)
    task = asyncio.create_task(node.source.run())
    try:
        await asyncio.wait_for(node.source.listed.wait(), 10)
        yield node
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await node.gate.close()


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(10):
        while not predicate():
            await asyncio.sleep(0.001)


async def test_waits_while_its_object_does_not_exist_then_applies_it(
    tmp_path: pathlib.Path,
) -> None:
    async with running(tmp_path) as node:
        assert not node.state.present and node.state.applied is None
        node.api.put(fakes.node_store(spec={
            "watermarks": {"highPercent": 60, "lowPercent": 50},
            "download": {"concurrency": 3, "bytesPerSecond": 5000},
        }))
        await _until(lambda: node.applied == 1)
        assert node.state.present and node.state.observed_generation == 1
        assert node.state.applied is not None and node.state.invalid is None
        assert node.ledger.high_percent == 60
        assert node.hub.settings.concurrency == 3 and node.hub.node.requests.limit == 3
        assert node.hub.settings.bytes_per_second == 5000


async def test_status_only_changes_apply_nothing(tmp_path: pathlib.Path) -> None:
    async with running(tmp_path) as node:
        obj = fakes.node_store()
        node.api.put(obj)
        await _until(lambda: node.applied == 1)
        notified = node.notified
        node.api.put(dict(obj, status={"observedGeneration": 1}))  # a status write, ours or not
        node.api.put(fakes.node_store(generation=2))
        await _until(lambda: node.applied == 2)
        assert node.notified == notified + 1  # only the spec change was applied


async def test_a_failing_spec_refuses_downloads_and_leaves_no_earlier_watermarks(
    tmp_path: pathlib.Path,
) -> None:
    async with running(tmp_path) as node:
        node.api.put(fakes.node_store(spec={"watermarks": {"highPercent": 60, "lowPercent": 50}}))
        await _until(lambda: node.applied == 1)
        node.api.put(fakes.node_store(generation=2, spec={
            "hub": {"huggingFaceEndpoint": "ftp://mirror.example"}}))
        await _until(lambda: node.state.invalid is not None)
        assert node.state.applied is None and node.state.effective is None
        assert node.state.observed_generation == 2
        assert "huggingFaceEndpoint" in (node.state.invalid or "")
        refused = await node.ensure()
        assert refused.state is interface.State.FAILED
        assert refused.reason is interface.Reason.INVALID_REQUEST
        assert "fails the plugin's check" in refused.message
        node.api.put(fakes.node_store(generation=3))
        await _until(lambda: node.applied == 2)
        assert node.state.invalid is None and node.gate.refusal is None


async def test_the_ca_configmap_it_names_is_read_checked_and_followed(
    tmp_path: pathlib.Path,
) -> None:
    pem = authority.ensure(tmp_path / "ca").ca_cert.read_text()
    async with running(tmp_path) as node:
        node.api.put(fakes.node_store(spec={"hub": {"caBundleConfigMap": "hub-ca"}}))
        await _until(lambda: node.state.invalid is not None)
        assert "ConfigMap gpustack-system/hub-ca does not exist" in (node.state.invalid or "")
        node.api.put_config_map(NAMESPACE, "hub-ca", {"ca.crt": pem})
        await _until(lambda: node.applied == 1)
        written = node.cache.state_file(apply.CA_FILE)
        assert written.read_text() == pem
        node.api.put_config_map(NAMESPACE, "hub-ca", {"ca.crt": "not a certificate"})
        await _until(lambda: node.state.invalid is not None)
        assert "is not a PEM bundle" in (node.state.invalid or "")
        node.api.put_config_map(NAMESPACE, "hub-ca", {"other": pem})
        await _until(lambda: "has no key ca.crt" in (node.state.invalid or ""))


async def test_a_deleted_object_is_waited_for_again(tmp_path: pathlib.Path) -> None:
    async with running(tmp_path) as node:
        node.api.put(fakes.node_store(uid="first"))
        await _until(lambda: node.state.uid == "first")
        node.api.delete()
        await _until(lambda: not node.state.present)
        node.api.put(fakes.node_store(uid="second"))
        await _until(lambda: node.state.uid == "second" and node.state.present)


async def test_an_unreachable_api_is_retried(tmp_path: pathlib.Path) -> None:
    node = Node(tmp_path)
    node.api.fail_lists = 3
    node.api.put(fakes.node_store())
    task = asyncio.create_task(node.source.run())
    try:
        await _until(lambda: node.applied == 1)
        assert node.api.fail_lists == 0 and "connection refused" in node.source.last_error
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await node.gate.close()


@pytest.fixture(autouse=True)
def _quiet_hub_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="httpx")


async def test_a_new_generation_with_the_same_hub_keeps_the_hub_client(
    tmp_path: pathlib.Path,
) -> None:
    async with running(tmp_path) as node:
        node.api.put(fakes.node_store(spec={"hub": {"noProxy": "10.0.0.0/8"}}))
        await _until(lambda: node.applied == 1)
        first = node.hub.hub_config
        assert first is not None and first.no_proxy == "10.0.0.0/8"
        node.api.put(fakes.node_store(generation=2, spec={
            "hub": {"noProxy": "10.0.0.0/8"}, "download": {"concurrency": 2}}))
        await _until(lambda: node.applied == 2)
        assert node.hub.hub_config is first and node.hub.node.requests.limit == 2
        node.api.put(fakes.node_store(generation=3, spec={"hub": {"noProxy": ""}}))
        await _until(lambda: node.applied == 3)
        assert node.hub.hub_config is not first
