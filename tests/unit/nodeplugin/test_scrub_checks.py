"""The integrity scrub's re-hash of the stored files and its pace (against real files; the cheap
check each pass starts with is ``cache/test_check.py``'s, the bind mounts and the quarantine's
effect on mounts are in the integration tests)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import threading
from collections.abc import Callable

from devkit import clock as clocks
from nodeplugin import scrub
from nodeplugin.cache import check, files, integrity, layout, locks, publish, quarantine
from nodeplugin.materialize import interface
from openapi import manifest

FILES = {"a.bin": b"a" * 5000, "dir/b.txt": b"hello"}


def _publish(cache: layout.Layout, contents: dict[str, bytes], staging: str = "staging") -> str:
    cache.create()
    entries = []
    for path, data in contents.items():
        algorithm = "gitsha1" if path.endswith(".txt") else "sha256"
        if algorithm == "sha256":
            hexdigest = hashlib.sha256(data).hexdigest()
        else:
            hexdigest = hashlib.sha1(manifest.git_blob_sha1_prefix(len(data)) + data).hexdigest()
        entries.append(manifest.Entry(path, algorithm, hexdigest, len(data)))  # type: ignore[arg-type]
    digest = manifest.digest(entries)
    where = cache.root / staging
    for path, data in contents.items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_bytes(data)
    publish.publish_tree(cache, where, digest, manifest_bytes=manifest.canonical_bytes(entries))
    return digest


def _entries(cache: layout.Layout, digest: str) -> dict[str, manifest.Entry]:
    return {e.path: e for e in check.stored(cache, digest)[1]}


def _stored(cache: layout.Layout, entry: manifest.Entry) -> pathlib.Path:
    return files.of(cache).path(files.identity(entry))


def _scrubber(cache: layout.Layout, found: list[str] | None = None,
              throttle: Callable[[float, threading.Event], scrub.Throttle] = scrub.Pacer,
              ) -> tuple[scrub.Scrubber, quarantine.Quarantine]:
    records = quarantine.Quarantine(cache)
    checks = integrity.Integrity(cache, records, locks.DigestLocks(), now=clocks.ManualClock().now,
                                 changed=(found if found is not None else []).append)
    return scrub.Scrubber(cache, checks, clock=clocks.ManualClock(), interval=0.0,
                          bytes_per_second=0, throttle=throttle), records


def test_sizes_and_hashes_of_stored_files_are_checked(tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    digest = _publish(cache, FILES)
    listed = _entries(cache, digest)
    never_stop: scrub.Throttle = lambda size: True  # noqa: E731
    for entry in listed.values():
        assert scrub.rehash(_stored(cache, entry), entry, never_stop) is None
    tree = cache.published_path(digest)
    (tree / "dir" / "b.txt").write_bytes(b"HELLO")  # same size, other bytes: the stored file
    assert check.problem(cache, digest) is None  # the cheap check cannot see it
    text = _stored(cache, listed["dir/b.txt"])
    found = scrub.rehash(text, listed["dir/b.txt"], never_stop)
    assert found is not None and found[:2] == (
        interface.Check.HASH, f"gitsha1:{listed['dir/b.txt'].hexdigest}: the bytes hash to "
        "another value")
    assert found[2] == files.inode_of(text.stat())
    (tree / "a.bin").write_bytes(b"a" * 10)
    # a wrong size is found without reading
    found = scrub.rehash(_stored(cache, listed["a.bin"]), listed["a.bin"], lambda size: False)
    assert found is not None and found[:2] == (
        interface.Check.SIZE, f"sha256:{listed['a.bin'].hexdigest}: 10 bytes, listed with 5000")


async def test_a_pass_checks_each_tree_before_it_hashes(tmp_path: pathlib.Path) -> None:
    """A tree without a kept manifest, or with a file of the wrong size, fails the cheap check
    the pass starts with: quarantined without a byte read; and the stored file of the wrong
    size leaves the store, found by its size alone."""
    cache = layout.Layout(tmp_path)
    cache.create()
    staging = tmp_path / "s"
    staging.mkdir()
    (staging / "f").write_bytes(b"x")
    bare = "sha256:" + "ab" * 32
    publish.publish_tree(cache, staging, bare)
    digest = _publish(cache, FILES)
    truncated = _entries(cache, digest)["a.bin"]
    os.truncate(cache.published_path(digest) / "a.bin", 10)
    read: list[int] = []
    scrubber, _ = _scrubber(cache, throttle=lambda rate, stop: lambda size: read.append(size)
                            is None)
    assert sorted(await scrubber.scrub_once()) == sorted([bare, digest])
    assert scrubber.failures == {interface.Check.MANIFEST: 1, interface.Check.SIZE: 2}
    assert read == [len(FILES["dir/b.txt"])]  # the other stored file; a.bin's never read
    assert files.of(cache).stored(truncated) is None


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
    # the damaged file left the store: the next materialization fetches it again
    entry = next(e for e in manifest.parse((held / layout.MANIFEST).read_bytes())
                 if e.path == "a.bin")
    assert files.of(cache).stored(entry) is None
    assert await scrubber.scrub_once() == []  # a quarantined tree is not read again


def test_the_pacer_stops_when_told(tmp_path: pathlib.Path) -> None:
    stop = threading.Event()
    pacer = scrub.Pacer(1.0, stop)  # one byte a second: the next chunk would wait long
    stop.set()
    assert pacer(1 << 20) is False
    assert scrub.Pacer(0, threading.Event())(1 << 30) is True  # 0: unlimited


def test_no_file_is_held_open_while_the_pace_waits(tmp_path: pathlib.Path) -> None:
    """A pass is spread over days: a file kept open through the pace's waits would keep its
    blocks allocated after collection freed it. Between chunks nothing is open, and a file
    swept (or stored again) meanwhile is left, not reported."""
    cache = layout.Layout(tmp_path)
    big = {"w.bin": bytes(range(256)) * (3 * scrub.CHUNK // 256)}
    digest = _publish(cache, big)
    entry = _entries(cache, digest)["w.bin"]
    path = _stored(cache, entry)
    open_between: list[list[str]] = []

    def watching(size: int) -> bool:
        held = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                if fd.isdigit() and os.path.exists(f"/proc/self/fd/{fd}")]
        open_between.append([p for p in held if p.startswith(str(cache.root))])
        return True

    assert scrub.rehash(path, entry, watching) is None
    assert len(open_between) == 3 and open_between == [[], [], []]

    def swept_after_first(size: int) -> bool:
        if not (tmp_path / "gone").exists():
            path.rename(tmp_path / "gone")  # what the store's sweep does (an unlink)
        return True

    assert scrub.rehash(path, entry, swept_after_first) is None
    (tmp_path / "gone").rename(path)

    def stored_again_after_first(size: int) -> bool:
        if path.stat().st_ino == first and not (tmp_path / "old").exists():
            path.rename(tmp_path / "old")  # another inode at the same name, other bytes
            path.write_bytes(b"\0" * entry.size)
        return True

    first = path.stat().st_ino
    # the file changed under the check: left for the next pass, not judged on mixed bytes
    assert scrub.rehash(path, entry, stored_again_after_first) is None
    # the next pass hashes the new file whole and finds it wrong
    found = scrub.rehash(path, entry, lambda size: True)
    assert found is not None and found[0] is interface.Check.HASH


async def test_a_shared_file_is_hashed_once_and_quarantines_every_tree_linking_it(
        tmp_path: pathlib.Path) -> None:
    cache = layout.Layout(tmp_path)
    shared = {"w.bin": b"w" * 70_000}
    one = _publish(cache, {**shared, "a.txt": b"one"})
    two = _publish(cache, {**shared, "a.txt": b"two"}, staging="staging-2")
    other = _publish(cache, {"x.bin": b"x" * 1000}, staging="staging-3")
    read: list[int] = []
    found: list[str] = []
    scrubber, records = _scrubber(
        cache, found, throttle=lambda rate, stop: lambda size: read.append(size) is None)
    assert await scrubber.scrub_once() == []
    # four stored files (w.bin once for both trees, two a.txt, x.bin), each read once
    assert scrubber.checked == 4 and sum(read) == 70_000 + 3 + 3 + 1000
    with open(cache.published_path(one) / "w.bin", "r+b") as handle:  # root writes past 0444
        handle.seek(60_000)
        handle.write(b"W")
    assert sorted(await scrubber.scrub_once()) == sorted([one, two]) == sorted(found)
    assert cache.is_published(other) and not cache.is_published(one)
    assert {digest for digest, _ in records.held()} == {one, two}
    entry = _entries(cache, other)["x.bin"]
    assert files.of(cache).stored(entry) is not None  # the good file stays stored
