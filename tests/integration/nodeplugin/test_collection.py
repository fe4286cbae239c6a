"""Collection on a small tmpfs (root): down to the low watermark, oldest first; referenced trees
(real bind mounts), pinned digests and partials being written survive; stale partials and old
failure records go; the kubelet cap; what makes it skip, said in the Ready message; a
reservation that does not fit collects first."""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import pathlib
from typing import Any

import grpc
import pytest

from nodeplugin.materialize import capacity
from tests.integration.nodeplugin import store_harness as harness
from tests.integration.nodeplugin.csi_harness import mounts_under

MIB = harness.MIB
HOUR = datetime.timedelta(hours=1)


async def _until(predicate: Any, what: str = "condition") -> None:
    async with asyncio.timeout(30):
        while not predicate():
            await asyncio.sleep(0.005)


def _trees(cache_dir: pathlib.Path, count: int, size: int, now: datetime.datetime
           ) -> list[str]:
    """``count`` trees of ``size`` bytes, tree 0 used longest ago (one hour apart)."""
    from nodeplugin.cache import layout

    cache = layout.Layout(cache_dir)
    digests = [harness.publish_tree(cache, f"t{i}", {"w.bin": bytes([i]) * size})
               for i in range(count)]
    harness.write_usage(cache, {d: now - (count + 1 - i) * HOUR for i, d in enumerate(digests)})
    return digests


async def _applied(node: harness.Node, spec: dict[str, Any]) -> None:
    node.give_spec(spec)
    await _until(lambda: node.plugin.store.state.applied is not None)


async def test_down_to_the_low_watermark_oldest_first_sparing_mounts_and_pins(
    mount_guard: pathlib.Path,
) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 64)
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 12, 3 * MIB, now)  # ~36 MiB of 64: above 50%
    artifacts = [(f"m{i}", d) for i, d in enumerate(digests)]
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet", artifacts=artifacts) as node:
        # The two oldest are mounted by Pods; the third oldest is pinned.
        for i in (0, 1):
            assert await node.mount(f"pod{i}", digests[i], f"m{i}") == (grpc.StatusCode.OK, "")
        total = harness.total_bytes(cache_dir)
        assert harness.used_bytes(cache_dir) > total * 50 // 100
        # Applying a spec collects at once (its watermarks may put usage over the high one).
        await _applied(node, {"watermarks": {"highPercent": 50, "lowPercent": 30},
                              "pinned": [digests[2]]})
        await _until(lambda: node.plugin.collector.runs >= 1)
        assert harness.used_bytes(cache_dir) <= total * 30 // 100
        gone = [d for d in digests if not node.cache.is_published(d)]
        # Oldest first, skipping what is mounted or pinned, and no more than needed.
        assert gone == digests[3:3 + len(gone)] and len(gone) >= 4
        assert node.cache.is_published(digests[3 + len(gone)])
        removed = node.plugin.collector.removed_bytes
        assert removed >= len(gone) * 3 * MIB
        for i in (0, 1):  # the Pods still read their trees
            assert (node.target(f"pod{i}") / "w.bin").read_bytes()[:1] == bytes([i])
        scrape = node.plugin.registry.get_sample_value(
            "gpustack_model_manager_gc_removed_bytes_total")
        assert scrape == removed
        # Under the watermark nothing more goes, whatever its age.
        assert (await node.plugin.collector.collect()).removed == []


async def test_a_withdrawn_pin_lets_collection_reclaim_the_bytes(mount_guard: pathlib.Path
                                                                  ) -> None:
    """The plugin's half of "deleting the prefetch unpins and the bytes are collected" (the
    worker's half, the pin leaving the store's spec on delete, is test_prefetch_standalone's):
    a pinned digest outlives every other tree under pressure, and the spec that no longer pins
    it (generation 2, as the worker writes it after the delete) collects it at once."""
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 32)
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 4, 4 * MIB, now)  # tree 1 pinned: tree 0's zeros use no space
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet") as node:
        pressure = {"watermarks": {"highPercent": 10, "lowPercent": 5}}  # the pinned one: 12%
        await _applied(node, {**pressure, "pinned": [digests[1]]})
        await _until(lambda: node.plugin.collector.runs >= 1)
        assert [d for d in digests if node.cache.is_published(d)] == [digests[1]]
        runs, held = node.plugin.collector.runs, harness.used_bytes(cache_dir)
        node.give_spec(pressure, generation=2)  # the prefetch deleted: the pin withdrawn
        await _until(lambda: node.plugin.collector.runs > runs
                     and not node.cache.is_published(digests[1]))
        # removed from objects/ at once, its bytes freed from trash/ just after
        await _until(lambda: harness.used_bytes(cache_dir) <= held - 4 * MIB)
        assert node.plugin.collector.removed_bytes >= 4 * 4 * MIB  # every tree's bytes


async def test_a_tree_unmounted_less_than_ten_minutes_ago_stays(mount_guard: pathlib.Path
                                                                ) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 32)
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 6, 3 * MIB, now)  # ~18 MiB of 32
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet",
                               artifacts=[("m0", digests[0])]) as node:
        assert await node.mount("pod0", digests[0], "m0") == (grpc.StatusCode.OK, "")
        await node.unmount("pod0")
        await _applied(node, {"watermarks": {"highPercent": 20, "lowPercent": 10}})
        await _until(lambda: node.plugin.collector.runs >= 1)
        # Everything else went; the oldest was unmounted a moment ago and stays.
        assert [d for d in digests if node.cache.is_published(d)] == [digests[0]]
        # Under the high watermark now; a reservation needing room asks for more.
        node.clock.advance(9 * 60)
        assert (await node.plugin.collector.collect(needed=20 * MIB)).removed == []
        node.clock.advance(2 * 60)
        assert (await node.plugin.collector.collect(needed=20 * MIB)).removed == [digests[0]]


async def test_a_partial_being_written_survives_and_a_stale_one_goes(
    mount_guard: pathlib.Path,
) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 32)
    writing: list[harness.Writing] = []

    def materializer(cache: Any) -> harness.Writing:
        writing.append(harness.Writing(cache))
        return writing[0]

    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet",
                               materializer=materializer) as node:
        busy = writing[0].start("sha256:" + "aa" * 32, 8 * MIB)
        stale = node.cache.new_partial("sha256:" + "bb" * 32)
        (stale.path / "part.bin").write_bytes(b"\0" * 8 * MIB)
        (stale.path / ".gpustack-attempt").write_text("{}")
        old = (node.clock.now() - datetime.timedelta(hours=30)).timestamp()
        for path in (busy, stale.path):
            os.utime(path, (old, old))
        await _applied(node, {"watermarks": {"highPercent": 30, "lowPercent": 10}})
        await _until(lambda: node.plugin.collector.runs >= 1)
        assert busy.is_dir() and not stale.path.exists()
        assert node.plugin.collector.removed_bytes >= 8 * MIB


async def test_old_failure_records_go_once_nothing_else_of_the_digest_is_left(
    mount_guard: pathlib.Path,
) -> None:
    async with harness.started(mount_guard, cache_dir=mount_guard / "cache",
                               kubelet_dir=mount_guard / "kubelet") as node:
        from nodeplugin.materialize import interface

        failures = node.plugin.failures
        for digest in ("sha256:" + "c1" * 32, "sha256:" + "c2" * 32):
            await asyncio.to_thread(failures.record, digest,
                                    interface.Reason.SOURCE_UNAVAILABLE, "the hub is failing")
        kept = node.cache.new_partial("sha256:" + "c2" * 32)  # partly on disk: kept
        (kept.path / ".gpustack-attempt").write_text("{}")
        await _applied(node, {})
        # (The five-minute runs may drop them too; what counts is what is left.)
        node.clock.advance(23 * 3600)
        await node.plugin.collector.collect()
        assert len(failures.all()) == 2
        node.clock.advance(2 * 3600)
        await node.plugin.collector.collect()
        assert [f.digest for f in failures.all()] == ["sha256:" + "c2" * 32]


async def test_the_kubelet_cap_when_the_cache_shares_kubelets_filesystem(
    mount_guard: pathlib.Path,
) -> None:
    shared = harness.mount_tmpfs(mount_guard / "disk", 64)
    cache_dir = shared / "cache"
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 10, 3 * MIB, now)  # ~30 MiB: under 90%, over the cap
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=shared / "kubelet") as node:
        await _applied(node, {"watermarks": {"highPercent": 90, "lowPercent": 80},
                              "kubelet": {"nodefsAvailable": "60%", "imagefsAvailable": "",
                                          "imageGCHighThresholdPercent": 85}})
        effective = node.plugin.store.state.effective
        assert effective is not None and (effective.high_percent, effective.low_percent) == (
            35, 34)
        assert node.plugin.ledger.high_percent == 35
        await _until(lambda: node.plugin.collector.runs >= 1)
        total = harness.total_bytes(shared)
        gone = [d for d in digests if not node.cache.is_published(d)]
        assert gone == digests[:len(gone)] and gone
        assert harness.used_bytes(shared) <= total * 34 // 100
        status = await node.plugin.store.composer.compose()
        ready = status["conditions"][0]
        assert "capped at 35%" in ready["message"] and "nodefs.available 60%" in ready["message"]


async def test_collection_skips_without_a_spec_with_a_failing_one_and_without_the_mount_table(
    mount_guard: pathlib.Path,
) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 32)
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 8, 3 * MIB, now)
    readable = [True]

    def mountinfo() -> str:
        if not readable[0]:
            raise PermissionError(13, "Permission denied")
        return pathlib.Path("/proc/self/mountinfo").read_text()

    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet",
                               read_mountinfo=mountinfo) as node:
        collector = node.plugin.collector
        outcome = await collector.collect()
        assert outcome.removed == [] and outcome.skipped is not None
        assert "no configuration has been applied yet" in outcome.skipped
        node.give_spec({"watermarks": {"highPercent": 20, "lowPercent": 10},
                        "hub": {"httpsProxy": "::not a proxy::"}})
        await _until(lambda: node.plugin.store.state.invalid is not None)
        outcome = await collector.collect()
        assert outcome.removed == [] and "spec fails its check" in (outcome.skipped or "")
        readable[0] = False
        node.give_spec({"watermarks": {"highPercent": 20, "lowPercent": 10}}, generation=2)
        await _until(lambda: node.plugin.store.state.applied is not None)
        outcome = await collector.collect()
        assert outcome.removed == [] and "mount table could not be read" in (outcome.skipped or "")
        status = await node.plugin.store.composer.compose()
        ready = status["conditions"][0]
        assert ready["status"] == "True" and "collection skipped" in ready["message"]
        assert all(node.cache.is_published(d) for d in digests)
        readable[0] = True
        outcome = await collector.collect()
        # (A report's look at the usage may have run collection a moment earlier.)
        assert outcome.skipped is None
        assert not all(node.cache.is_published(d) for d in digests)
        status = await node.plugin.store.composer.compose()
        assert "collection skipped" not in status["conditions"][0]["message"]


async def test_a_reservation_that_does_not_fit_collects_first(mount_guard: pathlib.Path) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 64)
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 8, 3 * MIB, now)  # ~24 MiB of 64
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet") as node:
        await _applied(node, {"watermarks": {"highPercent": 60, "lowPercent": 50}})
        await _until(lambda: node.plugin.collector.runs >= 1)  # under 60%: nothing went
        assert all(node.cache.is_published(d) for d in digests)
        ledger = node.plugin.ledger
        room = harness.total_bytes(cache_dir) * 60 // 100 - harness.used_bytes(cache_dir)
        # Does not fit as things are: collection makes room, oldest first, and it is admitted.
        reservation = await ledger.admit("sha256:" + "dd" * 32, room + 7 * MIB)
        assert reservation.remaining == room + 7 * MIB
        gone = [d for d in digests if not node.cache.is_published(d)]
        assert gone == digests[:len(gone)] and len(gone) >= 3
        reservation.release()
        try:
            await ledger.admit("sha256:" + "ee" * 32, harness.total_bytes(cache_dir))
        except capacity.InsufficientCapacity as exc:
            assert "high watermark" in exc.message
        else:
            raise AssertionError("a reservation larger than the cache was admitted")
    assert mounts_under(mount_guard / "kubelet") == []


async def test_passing_the_high_watermark_collects_and_nothing_to_remove_says_so(
    mount_guard: pathlib.Path,
) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 32)
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 4, 3 * MIB, now)  # ~12 MiB of 32: under 60%
    artifacts = [("m0", digests[0])]
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet", artifacts=artifacts) as node:
        assert await node.mount("pod0", digests[0], "m0") == (grpc.StatusCode.OK, "")
        await _applied(node, {"watermarks": {"highPercent": 60, "lowPercent": 40}})
        await _until(lambda: node.plugin.collector.runs >= 1)
        runs = node.plugin.collector.runs
        assert all(node.cache.is_published(d) for d in digests)
        # Something else fills the filesystem past the high watermark: the next report sees
        # it, and collection runs at once (not at its five-minute run).
        (cache_dir / "someone-elses.bin").write_bytes(b"\0" * 10 * MIB)
        await node.plugin.store.composer.compose()
        await _until(lambda: node.plugin.collector.runs > runs)
        assert [d for d in digests if node.cache.is_published(d)] == [digests[0]]
        # Still above it, and only the mounted tree is left: CapacityLow says so.
        (cache_dir / "more.bin").write_bytes(b"\0" * 8 * MIB)  # 3 + 10 + 8 of 32 MiB: above 60%
        await node.plugin.collector.collect()
        status = await node.plugin.store.composer.compose()
        low = next(c for c in status["conditions"] if c["type"] == "CapacityLow")
        assert (low["status"], low["reason"]) == ("True", "NothingToRemove")
        (cache_dir / "more.bin").unlink()
        (cache_dir / "someone-elses.bin").unlink()
        await node.plugin.collector.collect()
        status = await node.plugin.store.composer.compose()
        low = next(c for c in status["conditions"] if c["type"] == "CapacityLow")
        assert (low["status"], low["reason"]) == ("False", "WithinWatermarks")
        await node.unmount("pod0")


async def test_the_pool_switches_pause_and_evict(mount_guard: pathlib.Path) -> None:
    """The operator's switches (``spec.operations``, merged from the pool's ModelStore): paused,
    collection holds every tree past the high watermark, quarantined or not, until resumed; an
    evicted digest goes at once when no Pod mounts it, pinned or under the watermark."""
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 32)
    now = datetime.datetime.now(datetime.UTC)
    digests = _trees(cache_dir, 4, 4 * MIB, now)
    artifacts = [(f"m{i}", d) for i, d in enumerate(digests)]
    async with harness.started(mount_guard, cache_dir=cache_dir, artifacts=artifacts,
                               kubelet_dir=mount_guard / "kubelet") as node:
        pressure = {"watermarks": {"highPercent": 10, "lowPercent": 5}, "store": "large"}
        await _applied(node, {**pressure, "operations": {"pauseCollection": True}})
        outcome = await node.plugin.collector.collect()
        assert outcome.removed == [] and "paused" in (outcome.skipped or "")
        assert "ModelStore large" in (outcome.skipped or "")
        assert all(node.cache.is_published(d) for d in digests)  # past the watermark, held
        # resumed: collection takes them down to the low watermark
        runs = node.plugin.collector.runs
        node.give_spec(pressure, generation=2)
        await _until(lambda: node.plugin.collector.runs > runs
                     and not node.cache.is_published(digests[3]))

    cache_dir = harness.mount_tmpfs(mount_guard / "cache2", 64)
    digests = _trees(cache_dir, 3, 2 * MIB, now)
    artifacts = [(f"m{i}", d) for i, d in enumerate(digests)]
    async with harness.started(mount_guard, cache_dir=cache_dir, artifacts=artifacts,
                               kubelet_dir=mount_guard / "kubelet2") as node:
        assert await node.mount("pod0", digests[0], "m0") == (grpc.StatusCode.OK, "")
        # under the watermark, digest 1 pinned: evicting 0 (mounted) and 1 (pinned) takes 1
        await _applied(node, {"pinned": [digests[1]], "operations": {
            "evictDigests": [digests[0], digests[1]]}})
        await _until(lambda: not node.cache.is_published(digests[1]))
        assert node.cache.is_published(digests[0])  # a Pod mounts it: it stays
        assert node.cache.is_published(digests[2])  # not named: untouched


async def test_spec_evict_removes_at_once_whatever_the_watermarks_once_unmounted(
        mount_guard: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    """A prefetch deleted with cleanupOnDelete: the worker writes the digest into spec.evict.
    Far below the high watermark and within the ten-minute grace, an unmounted, unpinned tree
    goes as soon as the spec applies; a mounted one stays until its Pod unmounts it, then goes
    without waiting for a timer; a pinned one never does."""
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 64)
    now = datetime.datetime.now(datetime.UTC)
    free, mounted, pinned, other = _trees(cache_dir, 4, MIB, now)  # ~4 MiB of 64: no pressure
    caplog.set_level(logging.INFO, "nodeplugin.nodestore.collect")
    async with harness.started(mount_guard, cache_dir=cache_dir,
                               kubelet_dir=mount_guard / "kubelet",
                               artifacts=[("m1", mounted)]) as node:
        assert await node.mount("pod1", mounted, "m1") == (grpc.StatusCode.OK, "")
        await _applied(node, {"watermarks": {"highPercent": 80, "lowPercent": 70},
                              "pinned": [pinned], "evict": [free, mounted, pinned]})
        await _until(lambda: not node.cache.is_published(free))
        assert node.cache.is_published(mounted) and node.cache.is_published(pinned)
        assert node.cache.is_published(other)  # not asked for: the watermarks decide
        assert (node.target("pod1") / "w.bin").read_bytes()[:1] == bytes([1])
        await node.unmount("pod1")  # the mount ends: it goes now, no five-minute wait
        await _until(lambda: not node.cache.is_published(mounted))
        assert node.cache.is_published(pinned) and node.cache.is_published(other)
        said = f"removed {mounted} as the node's spec.evict asks"
        await _until(lambda: said in caplog.text)  # logged once the bytes are deleted
