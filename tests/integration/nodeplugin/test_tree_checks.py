"""Trees are checked before use (root, the real plugin process, its CSI socket, the fixture hub,
real bind mounts): trees the plugin downloaded are damaged while it is stopped (the stored
manifest edited, edited with a file edited to match, removed; a file truncated). Restarted, it
quarantines each before any mount binds it; the next mount of each materializes it again and
reads the hub's bytes: the node's stored files that are still whole are linked again, and the
hub serves exactly the files that were damaged (the one edited to match, the one truncated).
A Pod that mounted a damaged tree before the restart keeps its own copy until it unmounts, after
which the copy is removed."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pathlib
from collections.abc import Callable

import grpc
import pytest

from devkit import fixturehub
from devkit.harness import apiserver as support
from nodeplugin.cache import layout
from openapi import manifest
from tests.integration.nodeplugin import csi_harness
from tests.integration.nodeplugin.csi_harness import ArtifactApi, Kubelet, PluginProcess

pytestmark = pytest.mark.integration

COMMIT = "c" * 40  # what ArtifactApi.resolve writes as status.resolved.revision
NAMESPACE = "checks"
CASES = ("edited", "matched", "removed", "truncated")
"""The stored manifest edited; edited, with a file edited to match it; removed; a file cut."""


def _files(case: str) -> dict[str, bytes | int | fixturehub.FileSpec]:
    return {"config.json": f'{{"case": "{case}"}}\n'.encode(), "model.safetensors": 70_000,
            "tokenizer.json": fixturehub.FileSpec(size=3_000, lfs=False)}


def _writable(path: pathlib.Path) -> None:
    os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _damage(tree: pathlib.Path, case: str) -> None:
    """What a hand on the node (or a disk) does to a published tree; root writes past 0555."""
    stored = tree / layout.MANIFEST
    _writable(tree)
    if case == "removed":
        stored.unlink()
        return
    if case == "truncated":
        os.truncate(tree / "model.safetensors", 1_000)
        return
    entries = manifest.parse(stored.read_bytes())
    forged = b'{"case": "forged"}\n'
    changed = [manifest.Entry(e.path, "sha256", hashlib.sha256(forged).hexdigest(),
                              len(forged)) if e.path == "config.json" else e for e in entries]
    _writable(stored)
    stored.write_bytes(manifest.canonical_bytes(changed))
    if case == "matched":  # the file edited to match the edited manifest: sizes pass
        _writable(tree / "config.json")
        (tree / "config.json").write_bytes(forged)


def _read(target: pathlib.Path) -> dict[str, bytes]:
    """The model's files as a Pod reads them (the cache's marker and manifest aside)."""
    return {str(p.relative_to(target)): p.read_bytes() for p in sorted(target.rglob("*"))
            if p.is_file() and p.name not in layout.RESERVED_NAMES}


async def _until(predicate: Callable[[], bool], guard: float = 60.0) -> None:
    async with asyncio.timeout(guard):
        while not predicate():
            await asyncio.sleep(0.05)


async def test_damaged_trees_are_quarantined_before_any_mount_then_downloaded_again(
    apiserver: support.RunningServer, artifacts: ArtifactApi,
    start_plugin: Callable[..., PluginProcess],
) -> None:
    with fixturehub.run() as hub:
        digests: dict[str, str] = {}
        attributes: dict[str, dict[str, str]] = {}
        for case in CASES:
            repo = f"org/checks-{case}"
            hub.add_repo(repo, _files(case), commit=COMMIT)
            digests[case] = await csi_harness.hub_digest(hub, repo, COMMIT)
            created = artifacts.create(NAMESPACE, case, {"huggingFace": {"repository": repo}})
            uid = artifacts.resolve(created, digests[case])["metadata"]["uid"]
            attributes[case] = {"artifact": case, "artifactUID": uid,
                                "manifestDigest": digests[case]}
        want = {case: {path: hub.content(f"org/checks-{case}", path).read()
                       for path in _files(case)} for case in CASES}
        plugin = start_plugin(apiserver, extra_args=["--huggingface-endpoint", hub.endpoint])
        kubelet: Kubelet = plugin.kubelet()

        def mount(pod: str, case: str) -> pathlib.Path:
            request = kubelet.publish_request(namespace=NAMESPACE, pod_uid=pod,
                                              attributes=attributes[case])
            outcome = kubelet.publish_until_ok(request, timeout=60)
            assert outcome[-1] == (grpc.StatusCode.OK, ""), outcome[-3:]
            return pathlib.Path(request.target_path)

        for case in CASES:  # downloaded and published, read once
            assert _read(await asyncio.to_thread(mount, f"first-{case}", case)) == want[case]
        for case in CASES[:-1]:
            kubelet.unpublish(kubelet.target(f"first-{case}"))
        running = kubelet.target("first-truncated")  # a Pod that keeps its mount through it all
        plugin.stop()

        cache = layout.Layout(plugin.root)
        for case in CASES:
            _damage(cache.published_path(digests[case]), case)
        served = {case: hub.bytes_served(f"org/checks-{case}") for case in CASES}

        plugin.start()
        kubelet = plugin.kubelet()
        # the next mount of each: never the damaged tree; the hub's bytes, from the hub exactly
        # the files whose stored copy was damaged (a stored file of the wrong size is dropped)
        damaged = {"edited": 0, "removed": 0, "matched": len(want["matched"]["config.json"]),
                   "truncated": len(want["truncated"]["model.safetensors"])}
        for case in CASES:
            target = await asyncio.to_thread(mount, f"after-{case}", case)
            assert _read(target) == want[case], case
            assert hub.bytes_served(f"org/checks-{case}") - served[case] == damaged[case], case
        log = plugin.log()
        for case in CASES:
            assert f"integrity: {digests[case]} fails its check at start" in log, case
        assert "the stored manifest hashes to sha256:" in log  # edited, and edited to match
        assert "no stored manifest" in log
        assert "model.safetensors: 1000 bytes, the manifest says 70000" in log

        # the Pod that mounted the truncated tree before the restart still reads its own copy
        assert (running / "config.json").read_bytes() == want["truncated"]["config.json"]
        assert (running / "model.safetensors").stat().st_size == 1_000
        held = [p.name for p in cache.held.iterdir()] if cache.held.exists() else []
        assert [name.split(".")[0] for name in held] == [layout.hex_of(digests["truncated"])]
        record = cache.state / f"quarantine-{layout.hex_of(digests['truncated'])}.json"
        assert json.loads(record.read_bytes())["digest"] == digests["truncated"]
        # once it unmounts, its copy and the record go; the good trees stay
        kubelet.unpublish(running)
        await _until(lambda: not any(cache.held.iterdir()) and not record.exists())
        assert all(cache.is_published(digests[case]) for case in CASES)
        for case in CASES:
            kubelet.unpublish(kubelet.target(f"after-{case}"))
