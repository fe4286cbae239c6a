"""The node's file store with the assembled plugin (root: a small tmpfs the test mounts, real
bind mounts): a file two artifacts share is stored once, reserved once and counted once in
usage and ``storedBytes``, and goes with the last tree that links it; a tampered shared file
quarantines every tree using it while running Pods keep reading; no name of a tree's file lets
it be written; a cache of the older format is converted at start under a Pod's mount."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import pathlib
import subprocess
from typing import Any

import grpc

from devkit import fixturehub, trees
from hub import config as hub_config
from nodeplugin.cache import check, files, layout
from nodeplugin.materialize import download, local
from openapi import manifest
from tests.integration.nodeplugin import csi_harness
from tests.integration.nodeplugin import store_harness as harness

MIB = harness.MIB
REPO = "org/qwen"  # the repository and commit the harness' artifacts resolve to
COMMIT = "c" * 40
README = b"# qwen\n" * 100


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(30):
        while not predicate():
            await asyncio.sleep(0.005)


async def _mounted(node: harness.Node, pod: str, digest: str, artifact: str) -> pathlib.Path:
    async with asyncio.timeout(60):
        while True:
            code, message = await node.mount(pod, digest, artifact)
            if code == grpc.StatusCode.OK:
                return node.target(pod)
            assert code in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE), message
            await asyncio.sleep(0.02)


def _stored(cache: layout.Layout, digest: str, path: str) -> pathlib.Path:
    entry = next(e for e in check.stored(cache, digest)[1] if e.path == path)
    return files.of(cache).path(files.identity(entry))


async def test_a_shared_file_is_reserved_and_counted_once_and_goes_with_its_last_tree(
        mount_guard: pathlib.Path) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 64)
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"w.bin": 20 * MIB, "config.json": b"{}\n", "README.md": README},
                     commit=COMMIT)
        # two artifacts of one repository: the first without its README
        first = await csi_harness.hub_digest(hub, REPO, COMMIT, ignore=("README.md",))
        whole = await csi_harness.hub_digest(hub, REPO, COMMIT)
        artifacts = [("first", first, {"ignorePatterns": ["README.md"]}), ("whole", whole)]
        async with harness.started(
            mount_guard, cache_dir=cache_dir, kubelet_dir=mount_guard / "kubelet",
            artifacts=artifacts, imports=False,
            hub=hub_config.HubConfig(huggingface_endpoint=hub.endpoint),
            download=download.Settings(high_percent=50),
        ) as node:
            await _mounted(node, "a", first, "first")
            used = harness.used_bytes(cache_dir)
            served = hub.bytes_served(REPO)
            # 32 MiB under the high watermark, 20 used: the whole repository (20 MiB) fits
            # only because the reservation counts what the node lacks
            target = await _mounted(node, "b", whole, "whole")
            assert hub.bytes_served(REPO) - served == len(README)
            assert harness.used_bytes(cache_dir) - used < MIB
            assert (target / "w.bin").read_bytes() == hub.content(REPO, "w.bin").read()
            trees_ = [node.cache.published_path(d) / "w.bin" for d in (first, whole)]
            assert trees_[0].stat().st_ino == trees_[1].stat().st_ino
            await node.plugin.stock.settle()
            status = await node.plugin.store.composer.compose()
            stored = status["capacity"]["storedBytes"]
            assert 20 * MIB <= stored < 21 * MIB, stored
            scrape = node.plugin.registry.get_sample_value("gpustack_model_manager_stored_bytes")
            assert scrape == stored
            weights = _stored(node.cache, first, "w.bin")

            # collection: the first tree goes, the file stays with the tree still mounted
            await node.unmount("a")
            node.give_spec({"watermarks": {"highPercent": 10, "lowPercent": 5}})
            await _until(lambda: node.plugin.store.state.applied is not None)
            node.clock.advance(11 * 60)
            used = harness.used_bytes(cache_dir)
            await node.plugin.collector.collect()
            # the advanced clock may wake the background run first: either run removes it
            assert node.cache.published() == [whole]
            assert weights.exists() and used - harness.used_bytes(cache_dir) < MIB
            assert (target / "w.bin").read_bytes()[:4096] == \
                hub.content(REPO, "w.bin").read(0, 4096)
            # ... and goes with the last one
            await node.unmount("b")
            freed = node.plugin.collector.removed_bytes
            node.clock.advance(11 * 60)
            await node.plugin.collector.collect()
            assert node.cache.published() == []
            assert not weights.exists()
            assert used - harness.used_bytes(cache_dir) >= 20 * MIB
            assert node.plugin.collector.removed_bytes - freed >= 20 * MIB
            await node.plugin.stock.settle()
            status = await node.plugin.store.composer.compose()
            assert status["capacity"]["storedBytes"] < MIB


async def test_a_tampered_shared_file_quarantines_every_tree_using_it(
        mount_guard: pathlib.Path) -> None:
    shared = bytes(range(256)) * 8192
    imports = mount_guard / "imports"
    one = local.write_import(imports, {"w.bin": shared, "config.json": b'{"one": 1}'})
    two = local.write_import(imports, {"w.bin": shared, "config.json": b'{"two": 2}'})
    async with harness.started(mount_guard, cache_dir=mount_guard / "cache",
                               kubelet_dir=mount_guard / "kubelet",
                               artifacts=[("one", one), ("two", two)],
                               scrub_interval=1.0) as node:
        running = {d: await _mounted(node, f"running-{n}", d, n)
                   for n, d in (("one", one), ("two", two))}
        stored = _stored(node.cache, one, "w.bin")
        with open(stored, "r+b") as handle:  # a hand on the node: root writes past 0444
            handle.seek(70_000)
            handle.write(b"\xff")
        assert sorted(await node.plugin.store.scrubber.scrub_once()) == sorted([one, two])
        assert not node.cache.is_published(one) and not node.cache.is_published(two)
        assert {d for d, _ in node.plugin.quarantined.held()} == {one, two}
        assert not stored.exists()  # out of the store: never linked again
        for digest in (one, two):  # the running Pods keep reading their own copies
            assert (running[digest] / "w.bin").read_bytes()[70_000] == 0xFF
        # the next mounts of both materialize them again, sharing one new, good file
        fresh = {d: await _mounted(node, f"new-{n}", d, n)
                 for n, d in (("one", one), ("two", two))}
        for digest in (one, two):
            assert (fresh[digest] / "w.bin").read_bytes() == shared
        assert (fresh[one] / "w.bin").stat().st_ino == (fresh[two] / "w.bin").stat().st_ino
        for name in ("one", "two"):
            await node.unmount(f"running-{name}")
        await _until(lambda: not node.plugin.quarantined.held())
        status = await node.plugin.store.composer.compose()
        states = {m["digest"]: m["state"] for m in status["models"]}
        assert states == {one: "Ready", two: "Ready"}


_PROBE = """
import errno, json, os, sys
found = {}
for name, (fd, file_name) in json.loads(sys.argv[1]).items():
    outcome = {}
    for what, call in (
        ("read", lambda: os.close(os.open(file_name, os.O_RDONLY, dir_fd=fd))),
        ("write", lambda: os.close(os.open(file_name, os.O_WRONLY, dir_fd=fd))),
        ("unlink", lambda: os.unlink(file_name, dir_fd=fd)),
        ("create", lambda: os.close(os.open("new", os.O_WRONLY | os.O_CREAT, 0o644,
                                            dir_fd=fd))),
    ):
        try:
            call()
            outcome[what] = "ok"
        except OSError as exc:
            outcome[what] = errno.errorcode[exc.errno]
    found[name] = outcome
print(json.dumps(found))
"""


async def test_no_name_of_a_tree_file_lets_it_be_written(mount_guard: pathlib.Path) -> None:
    digest = local.write_import(mount_guard / "imports", {"w.bin": b"w" * 50_000})
    async with harness.started(mount_guard, cache_dir=mount_guard / "cache",
                               kubelet_dir=mount_guard / "kubelet",
                               artifacts=[("m", digest)]) as node:
        target = await _mounted(node, "p", digest, "m")
        cache = node.cache
        stored = _stored(cache, digest, "w.bin")
        names = {"tree": cache.published_path(digest) / "w.bin", "store": stored,
                 "view": cache.root / "view" / layout.hex_of(digest) / "w.bin",
                 "pod": target / "w.bin"}
        assert len({os.stat(path).st_ino for path in names.values()}) == 1  # one file
        assert all(os.stat(path).st_mode & 0o7777 == 0o444 for path in names.values())
        # root: the Pod's mount and the view are read-only mounts
        for name in ("pod", "view"):
            try:
                os.close(os.open(names[name], os.O_WRONLY))
            except OSError as exc:
                assert exc.errno == errno.EROFS, name
            else:
                raise AssertionError(f"{name}: opened for writing")
        # anyone else reaches each name (its directory passed open) and reads it, but writes,
        # removes or adds through none
        fds = {name: os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
               for name, path in names.items()}
        try:
            probe = subprocess.run(
                ["/usr/bin/python3", "-c", _PROBE,
                 json.dumps({n: (fd, names[n].name) for n, fd in fds.items()})],
                user=65534, group=65534, extra_groups=[], pass_fds=list(fds.values()),
                capture_output=True, text=True, check=False)
        finally:
            for fd in fds.values():
                os.close(fd)
        assert probe.returncode == 0, probe.stderr
        found = json.loads(probe.stdout)
        for name in ("tree", "store"):
            assert found[name] == {"read": "ok", "write": "EACCES", "unlink": "EACCES",
                                   "create": "EACCES"}, (name, found[name])
        for name in ("view", "pod"):
            assert found[name]["read"] == "ok", (name, found[name])
            assert found[name]["write"] in ("EACCES", "EROFS"), (name, found[name])
            assert found[name]["unlink"] in ("EACCES", "EROFS"), (name, found[name])
            assert found[name]["create"] in ("EACCES", "EROFS"), (name, found[name])
        assert stored.read_bytes() == b"w" * 50_000
        await node.unmount("p")


async def test_a_format1_cache_is_converted_at_start_while_a_pod_reads_it(
        mount_guard: pathlib.Path) -> None:
    cache_dir = harness.mount_tmpfs(mount_guard / "cache", 64)
    weights = bytes(range(256)) * (32 * 1024)  # 8 MiB, held twice by the older plugin
    one = trees.publish_format1_tree(cache_dir, "one", {"w.bin": weights, "a.json": b"1"})
    two = trees.publish_format1_tree(cache_dir, "two", {"w.bin": weights, "b.json": b"2"})
    before = harness.used_bytes(cache_dir)
    # a Pod of the older plugin mounts tree two, and holds its weights open
    kubelet = mount_guard / "kubelet"
    old = kubelet / "pods" / "old" / "volumes" / "kubernetes.io~csi" / "model" / "mount"
    old.mkdir(parents=True)
    tree_two = cache_dir / "objects" / "sha256" / layout.hex_of(two)
    subprocess.run(["mount", "--bind", str(tree_two), str(old)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(old)], check=True)
    with open(old / "w.bin", "rb") as held_open:
        async with harness.started(mount_guard, cache_dir=cache_dir, kubelet_dir=kubelet,
                                   artifacts=[("one", one), ("two", two)]) as node:
            await node.plugin.checks.done.wait()
            assert node.cache.format() == layout.FORMAT
            assert node.plugin.checks.failures == {} and node.plugin.checks.converted == 1
            paths = [node.cache.published_path(d) / "w.bin" for d in (one, two)]
            assert paths[0].stat().st_ino == paths[1].stat().st_ino
            for digest in (one, two):
                assert check.problem(node.cache, digest) is None
            # the Pod reads the same bytes through its mount, and from the file it held open
            assert (old / "w.bin").read_bytes() == weights
            assert held_open.read() == weights
            assert node.plugin.volume_set.references.count(two) == 1
            target = await _mounted(node, "new", one, "one")
            assert (target / "w.bin").stat().st_ino == paths[1].stat().st_ino
            await node.plugin.stock.settle()
            status = await node.plugin.store.composer.compose()
            assert 8 * MIB <= status["capacity"]["storedBytes"] < 9 * MIB
            await node.unmount("new")
    # the copy held twice is freed once its last reader closed it
    assert before - harness.used_bytes(cache_dir) >= 8 * MIB - 64 * 1024
    listed = manifest.parse((cache_dir / "objects" / "sha256" / layout.hex_of(one)
                             / layout.MANIFEST).read_bytes())
    assert {e.path for e in listed} == {"w.bin", "a.json"}
