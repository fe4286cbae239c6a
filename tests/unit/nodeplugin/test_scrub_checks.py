"""The integrity scrub's re-hash and its pace (against real files; the cheap check it starts
with is ``cache/test_check.py``'s, the bind mounts and the quarantine's effect on mounts are in
the integration tests)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import threading

from devkit import clock as clocks
from nodeplugin import scrub
from nodeplugin.cache import check, integrity, layout, locks, publish, quarantine
from nodeplugin.materialize import interface
from openapi import manifest

FILES = {"a.bin": b"a" * 5000, "dir/b.txt": b"hello"}


def _publish(cache: layout.Layout, files: dict[str, bytes]) -> str:
    cache.create()
    entries = []
    for path, data in files.items():
        algorithm = "gitsha1" if path.endswith(".txt") else "sha256"
        if algorithm == "sha256":
            hexdigest = hashlib.sha256(data).hexdigest()
        else:
            hexdigest = hashlib.sha1(manifest.git_blob_sha1_prefix(len(data)) + data).hexdigest()
        entries.append(manifest.Entry(path, algorithm, hexdigest, len(data)))  # type: ignore[arg-type]
    digest = manifest.digest(entries)
    staging = cache.root / "staging"
    for path, data in files.items():
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        (staging / path).write_bytes(data)
    publish.publish_tree(cache, staging, digest, manifest_bytes=manifest.canonical_bytes(entries))
    return digest


def test_sizes_names_and_hashes_are_checked(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    digest = _publish(cache, FILES)
    never_stop: scrub.Throttle = lambda size: True  # noqa: E731
    assert scrub.rehash(cache, digest, never_stop) is None
    tree = cache.published_path(digest)
    (tree / "dir" / "b.txt").write_bytes(b"HELLO")  # same size, other bytes
    assert check.problem(cache, digest) is None  # the cheap check cannot see it
    assert scrub.rehash(cache, digest, never_stop) == (
        interface.Check.HASH, "dir/b.txt: gitsha1 differs from the manifest")
    (tree / "a.bin").write_bytes(b"a" * 10)
    # the re-hash starts with the cheap check: a wrong size is found without reading
    assert scrub.rehash(cache, digest, lambda size: False) == (
        interface.Check.SIZE, "a.bin: 10 bytes, the manifest says 5000")


def test_a_tree_without_a_kept_manifest_fails(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    cache.create()
    staging = tmp_path / "s"
    staging.mkdir()
    (staging / "f").write_bytes(b"x")
    digest = "sha256:" + "ab" * 32
    publish.publish_tree(cache, staging, digest)
    assert scrub.rehash(cache, digest, lambda size: True) == (
        interface.Check.MANIFEST, "no stored manifest")


async def test_a_pass_is_spread_over_the_interval_and_capped(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    digest = _publish(cache, FILES)
    total = sum(len(d) for d in FILES.values())
    rates: list[float] = []
    seen: list[int] = []

    def throttle(rate: float, stop: threading.Event) -> scrub.Throttle:
        rates.append(rate)
        return lambda size: seen.append(size) is None

    records = quarantine.Quarantine(cache)
    found: list[str] = []
    checks = integrity.Integrity(cache, records, locks.DigestLocks(), now=clocks.ManualClock().now,
                                 changed=found.append)
    scrubber = scrub.Scrubber(cache, checks, clock=clocks.ManualClock(), interval=100.0,
                              bytes_per_second=1000, throttle=throttle)
    assert await scrubber.scrub_once() == []
    assert rates == [total / 100.0] and sum(seen) == total  # the interval's pace: slower
    scrubber.interval = 0.001
    await scrubber.scrub_once()
    assert rates[-1] == 1000  # the cap
    tree = cache.published_path(digest)
    (tree / "a.bin").write_bytes(b"b" * 5000)
    assert await scrubber.scrub_once() == [digest] and found == [digest]
    assert scrubber.failures == {interface.Check.HASH: 1}  # the metrics' reason
    assert records.added == 1
    entry = records.get(digest)
    assert entry is not None and entry.message == check.MESSAGES[check.Check.HASH]
    assert quarantine.Quarantine(cache).get(digest) is not None  # kept across a restart
    # taken out of objects/ (the next mount materializes it again), held apart with its bytes
    assert not cache.is_published(digest) and not tree.exists()
    [(held_digest, held)] = records.held()
    assert held_digest == digest and (held / "a.bin").read_bytes() == b"b" * 5000
    assert await scrubber.scrub_once() == []  # a quarantined tree is not read again


def test_the_pacer_stops_when_told(tmp_path: pathlib.Path) -> None:
    stop = threading.Event()
    pacer = scrub.Pacer(1.0, stop)  # one byte a second: the next chunk would wait long
    stop.set()
    assert pacer(1 << 20) is False
    assert scrub.Pacer(0, threading.Event())(1 << 30) is True  # 0: unlimited


def test_no_file_is_held_open_while_the_pace_waits(tmp_path: pathlib.Path) -> None:
    """A pass is spread over days: a file kept open through the pace's waits would keep its
    blocks allocated after collection deleted its tree. Between chunks nothing is open, and a
    tree collected (or published again) meanwhile is left, not reported."""
    cache = layout.Layout(tmp_path)
    big = {"w.bin": bytes(range(256)) * (3 * scrub.CHUNK // 256)}
    digest = _publish(cache, big)
    tree = cache.published_path(digest)
    open_between: list[list[str]] = []

    def watching(size: int) -> bool:
        held = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                if fd.isdigit() and os.path.exists(f"/proc/self/fd/{fd}")]
        open_between.append([p for p in held if p.startswith(str(tree))])
        return True

    assert scrub.rehash(cache, digest, watching) is None
    assert len(open_between) == 3 and open_between == [[], [], []]

    def collect_after_first(size: int) -> bool:
        if not (tmp_path / "gone").exists():
            tree.rename(tmp_path / "gone")  # what collection's rename into trash/ does
        return True

    assert scrub.rehash(cache, digest, collect_after_first) is None
    (tmp_path / "gone").rename(tree)

    def republish_after_first(size: int) -> bool:
        path = tree / "w.bin"
        if path.stat().st_nlink == 1 and not (tmp_path / "old").exists():
            path.rename(tmp_path / "old")  # another inode at the same path, other bytes
            path.write_bytes(b"\0" * len(big["w.bin"]))
        return True

    # the file changed under the check: left for the next pass, not quarantined on mixed bytes
    assert scrub.rehash(cache, digest, republish_after_first) is None
    # the next pass hashes the new file whole and finds it wrong
    assert scrub.rehash(cache, digest, lambda size: True) == (
        interface.Check.HASH, "w.bin: sha256 differs from the manifest")
