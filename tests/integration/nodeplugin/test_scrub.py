"""Integrity after publication (root, real bind mounts): a flipped byte found by the scrub
quarantines the tree, new mounts are refused with the reason while a running Pod keeps reading,
the tree goes once unmounted and the next mount imports it again; a file of the wrong size is
caught at start, before the socket serves."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import grpc

from nodeplugin.materialize import local
from tests.integration.nodeplugin import store_harness as harness
from tests.integration.nodeplugin.csi_harness import mounts_under

FILES = {"config.json": b"{}", "model.bin": bytes(range(256)) * 4096}


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(30):
        while not predicate():
            await asyncio.sleep(0.005)


async def _published(node: harness.Node, pod: str, digest: str) -> None:
    for _ in range(400):
        code, _ = await node.mount(pod, digest, "qwen")
        if code == grpc.StatusCode.OK:
            return
        assert code in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE)
        await asyncio.sleep(0.02)
    raise AssertionError("the import never published")


async def test_a_flipped_byte_quarantines_the_tree_until_its_last_pod_ends(
    mount_guard: pathlib.Path,
) -> None:
    digest = local.write_import(mount_guard / "imports", FILES)
    async with harness.started(
        mount_guard, cache_dir=mount_guard / "cache", kubelet_dir=mount_guard / "kubelet",
        artifacts=[("qwen", digest)], scrub_interval=1.0,
    ) as node:
        node.give_spec({})
        await _until(lambda: node.plugin.store.state.applied is not None)
        await _published(node, "running", digest)
        tree = node.cache.published_path(digest)
        data = bytearray((tree / "model.bin").read_bytes())
        data[5000] ^= 0xFF
        (tree / "model.bin").write_bytes(bytes(data))  # root writes past 0444
        await node.plugin.store.scrubber.scrub_once()
        assert digest in node.plugin.quarantined
        # A new mount is refused with the reason; the running Pod keeps reading its mount.
        code, message = await node.mount("new", digest, "qwen")
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "IntegrityMismatch" in message and "no longer matches its manifest" in message
        assert (node.target("running") / "config.json").read_bytes() == b"{}"
        status = await node.plugin.store.composer.compose()
        entry = next(m for m in status["models"] if m["digest"] == digest)
        assert (entry["state"], entry["reason"]) == ("Failed", "IntegrityMismatch")
        assert entry["referenced"] is True
        # Once no Pod mounts it the tree goes; the next mount imports it again.
        await node.unmount("running")
        await _until(lambda: not tree.exists() and digest not in node.plugin.quarantined)
        await _published(node, "again", digest)
        assert (node.target("again") / "model.bin").read_bytes() == FILES["model.bin"]
        await node.unmount("again")
    assert mounts_under(mount_guard / "kubelet") == []


async def test_a_file_of_the_wrong_size_is_caught_at_start(mount_guard: pathlib.Path) -> None:
    cache_dir = mount_guard / "cache"
    from nodeplugin.cache import layout

    digest = harness.publish_tree(layout.Layout(cache_dir), "t", FILES)
    with open(layout.Layout(cache_dir).published_path(digest) / "model.bin", "r+b") as handle:
        handle.truncate(100)
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet",
                               artifacts=[("qwen", digest)]) as node:
        assert digest in node.plugin.quarantined  # before the socket served
        code, message = await node.mount("p", digest, "qwen")
        assert code == grpc.StatusCode.UNAVAILABLE and "IntegrityMismatch" in message
