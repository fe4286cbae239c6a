"""Integrity after publication (root, real bind mounts): a flipped byte found by the scrub
quarantines the tree: it is taken out of use at once, the next mount imports it again and gets
the right bytes while a running Pod keeps reading its own copy, which goes once unmounted; a
file of the wrong size is caught by the start check before any mount binds it."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import grpc

from nodeplugin.materialize import interface, local
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


def _held(node: harness.Node) -> list[str]:
    return [digest for digest, _ in node.plugin.quarantined.held()]


async def test_a_flipped_byte_quarantines_the_tree_and_the_next_mount_imports_it_again(
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
        assert await node.plugin.store.scrubber.scrub_once() == [digest]
        entry = node.plugin.quarantined.get(digest)
        assert entry is not None and "no longer matches its manifest" in entry.message
        # taken out of use at once: no longer published, held apart while a Pod mounts it
        assert not node.cache.is_published(digest) and _held(node) == [digest]
        status = await node.plugin.store.composer.compose()
        listed = next(m for m in status["models"] if m["digest"] == digest)
        assert (listed["state"], listed["reason"]) == ("Failed", "IntegrityMismatch")
        assert listed["referenced"] is True
        # A new mount imports it again and reads the right bytes; the running Pod keeps its own.
        await _published(node, "new", digest)
        assert (node.target("new") / "model.bin").read_bytes() == FILES["model.bin"]
        assert (node.target("running") / "model.bin").read_bytes() == bytes(data)
        assert (node.target("running") / "config.json").read_bytes() == b"{}"
        status = await node.plugin.store.composer.compose()
        listed = next(m for m in status["models"] if m["digest"] == digest)
        assert listed["state"] == "Ready" and "reason" not in listed
        # Once no Pod mounts the held copy it goes, and its record with it.
        await node.unmount("running")
        await _until(lambda: not _held(node) and digest not in node.plugin.quarantined)
        assert node.cache.is_published(digest)  # the good copy stays
        assert (node.target("new") / "model.bin").read_bytes() == FILES["model.bin"]
        await _published(node, "again", digest)
        assert (node.target("again") / "model.bin").read_bytes() == FILES["model.bin"]
        await node.unmount("new")
        await node.unmount("again")
    assert mounts_under(mount_guard / "kubelet") == []


async def test_a_file_of_the_wrong_size_is_caught_before_any_mount(
        mount_guard: pathlib.Path) -> None:
    cache_dir = mount_guard / "cache"
    from nodeplugin.cache import layout

    digest = harness.publish_tree(layout.Layout(cache_dir), "t", FILES)
    assert local.write_import(mount_guard / "imports", FILES) == digest
    with open(layout.Layout(cache_dir).published_path(digest) / "model.bin", "r+b") as handle:
        handle.truncate(100)
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet",
                               artifacts=[("qwen", digest)]) as node:
        # the first mount, whether or not the start pass got there first, never binds it
        await _published(node, "p", digest)
        assert (node.target("p") / "model.bin").read_bytes() == FILES["model.bin"]
        await node.plugin.checks.done.wait()
        assert node.plugin.checks.failures == {interface.Check.SIZE: 1}
        await node.unmount("p")


async def test_a_new_rehash_request_starts_a_pass_now(mount_guard: pathlib.Path) -> None:
    """``spec.operations.rehashRequest`` (the pool's "re-hash now", after a rollback): a new value
    starts a full pass at once instead of after the interval; the same value again does not."""
    digest = local.write_import(mount_guard / "imports", FILES)
    async with harness.started(
        mount_guard, cache_dir=mount_guard / "cache", kubelet_dir=mount_guard / "kubelet",
        artifacts=[("qwen", digest)], scrub_interval=86400.0,
    ) as node:
        node.give_spec({})
        await _until(lambda: node.plugin.store.state.applied is not None)
        await _published(node, "running", digest)
        scrubber = node.plugin.store.scrubber
        await _until(lambda: scrubber.passes >= 1)  # the first pass, after the start checks
        passes = scrubber.passes
        node.give_spec({"operations": {"rehashRequest": "after-rollback-1"}}, generation=2)
        await _until(lambda: scrubber.passes > passes)
        assert scrubber.checked >= 1
        passes = scrubber.passes
        node.give_spec({"operations": {"rehashRequest": "after-rollback-1"},
                        "watermarks": {"highPercent": 90, "lowPercent": 80}}, generation=3)
        await _until(lambda: node.plugin.store.state.applied is not None
                     and node.plugin.store.state.applied.high_percent == 90)
        await asyncio.sleep(0.2)
        assert scrubber.passes == passes  # the same request is not asked twice
