"""collect: 10,000 published trees on a tmpfs (root), 1,000 of them referenced (in the plugin's
table and in the mount table it reads), usage above the high watermark: one collection down to
the low watermark.

Figures: CPU seconds to choose (read the mount table, order the candidates; target <= 2 s)
against sorting 10,000 keys in Python (the floor of any choice), in interleaved rounds (choose,
sort, choose, sort ...; choosing removes nothing, so every round sees the same 10,000 trees):
the medians of each side's rounds, and each round's ratio. Then the whole collection's wall time
(choose and remove) with the trees it removed; that figure has no rounds, as its baseline is
none and the collection, once done, cannot be repeated on the same trees.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import pathlib
import random
import statistics
import subprocess
import tempfile
import time
from typing import Any

from bench import result
from devkit import clock as manualclock
from nodeplugin.cache import inventory, layout, locks, quarantine, refs, trees, usage
from nodeplugin.materialize import capacity
from nodeplugin.materialize import failures as failure_records
from nodeplugin.nodestore import apply, collect, watermarks
from nodeplugin.nodestore import spec as specs

TREES = 10_000
REFERENCED = 1_000
FILE_BYTES = 60 * 1024
TMPFS_MIB = 1100
ROUNDS = 5


def _populate(cache: layout.Layout, now: datetime.datetime) -> list[str]:
    """10,000 trees laid out as publication leaves them (marker and manifest), without the
    fsyncs (a tmpfs has nothing to sync), and their usage records spread over a year."""
    cache.create()
    rng = random.Random(5)
    digests: list[str] = []
    records: dict[str, Any] = {}
    payload = b"w" * FILE_BYTES
    for i in range(TREES):
        digest = f"sha256:{i:064x}"
        tree = cache.published_path(digest)
        tree.mkdir()
        (tree / "weights.bin").write_bytes(payload)
        (tree / layout.MARKER).write_bytes(layout.marker_bytes(digest))
        digests.append(digest)
        moment = now - datetime.timedelta(hours=rng.randrange(2, 24 * 365))
        records[digest] = {"lastUsedTime": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "referenced": False}
    (cache.state / usage.FILE_NAME).write_text(json.dumps({"digests": records}))
    return digests


def _mountinfo(mount_point: pathlib.Path, objects: pathlib.Path, referenced: list[str]) -> str:
    """A mount table with the 1,000 bind mounts of the referenced trees (what
    ``/proc/self/mountinfo`` shows for them), the tmpfs itself first."""
    inner = "/" + str(objects.relative_to(mount_point))
    lines = [f"1 0 0:99 / {mount_point} rw - tmpfs tmpfs rw"]
    for n, digest in enumerate(referenced):
        lines.append(f"{n + 2} 1 0:99 {inner}/{layout.hex_of(digest)} "
                     f"/var/lib/kubelet/pods/p{n}/volumes/kubernetes.io~csi/m/mount ro - tmpfs "
                     "tmpfs ro")
    return "\n".join(lines) + "\n"


async def _run(base: pathlib.Path) -> dict[str, Any]:
    root = base / "fs"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MIB}m", "tmpfs", str(root)],
                   check=True)
    try:
        return await _collect(root)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


async def _collect(root: pathlib.Path) -> dict[str, Any]:
    clock = manualclock.ManualClock(datetime.datetime.now(datetime.UTC))
    cache = layout.Layout(root / "cache")
    digests = _populate(cache, clock.now())
    referenced = random.Random(9).sample(digests, REFERENCED)
    table = refs.References({f"/var/lib/kubelet/pods/p{n}/mount": d
                             for n, d in enumerate(referenced)})
    usage_store = usage.UsageStore(cache.state_file(usage.FILE_NAME), clock=clock.now)
    usage_store.load()
    stock = inventory.Inventory(cache)
    stock.scan()
    ledger = capacity.Capacity(cache.root)
    space = ledger.usage()
    used_percent = space.used_bytes * 100 // space.total_bytes
    high, low = max(2, used_percent - 10), max(1, used_percent // 3)
    node = apply.NodeState(present=True, observed_generation=1)
    node.applied = specs.parse({"metadata": {"name": "bench"}, "spec": {
        "watermarks": {"highPercent": high, "lowPercent": low}}})
    node.effective = watermarks.effective(high, low, None, total_bytes=space.total_bytes,
                                          shared=False)
    mountinfo = _mountinfo(root, cache.objects, referenced)
    collector = collect.Collector(
        cache, references=table, usage_store=usage_store, digest_locks=locks.DigestLocks(),
        failures=failure_records.Failures(cache), quarantined=quarantine.Quarantine(cache),
        running=list, ledger=ledger, stock=stock, tree_facts=trees.Trees(cache), node=node,
        clock=clock, read_mountinfo=lambda: mountinfo,
    )  # fmt: skip
    choices: list[float] = []
    floors: list[float] = []
    for _ in range(ROUNDS):
        began_cpu = time.process_time()
        scanned = refs.scan(refs.parse_mountinfo(mountinfo), str(cache.objects))
        mounted = {layout.digest_of_hex(h) for h in scanned.values()}
        chosen = collector.candidates(table.digests() | mounted, frozenset())
        choices.append(time.process_time() - began_cpu)
        assert len(chosen) == TREES - REFERENCED
        keys = [(random.random(), f"{i:064x}") for i in range(TREES)]
        began_cpu = time.process_time()
        sorted(keys)
        floors.append(time.process_time() - began_cpu)
    began = time.perf_counter()
    outcome = await collector.collect()
    wall = time.perf_counter() - began
    after = ledger.usage()
    assert after.used_bytes <= after.total_bytes * low // 100
    assert not set(outcome.removed) & set(referenced)
    return {
        "choice_cpu_s": statistics.median(choices), "floor_cpu_s": statistics.median(floors),
        "choice_cpu_rounds_s": [round(x, 6) for x in choices],
        "floor_cpu_rounds_s": [round(x, 6) for x in floors], "collect_wall_s": wall,
        "removed_trees": len(outcome.removed), "removed_bytes": outcome.removed_bytes,
        "high_percent": high, "low_percent": low, "used_percent_before": used_percent,
        "used_percent_after": after.used_bytes * 100 // after.total_bytes,
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as base:
        figures = asyncio.run(_run(pathlib.Path(base)))
    params = {"trees": TREES, "referenced": REFERENCED, "rounds": ROUNDS,
              "target_choice_cpu_s": 2.0, **figures}
    result.report("collect", figures["choice_cpu_s"], "s", figures["floor_cpu_s"],
                  higher_is_better=False, params=params,
                  rounds=list(zip(figures["choice_cpu_rounds_s"], figures["floor_cpu_rounds_s"],
                                  strict=True)))
    result.report("collect-wall", figures["collect_wall_s"], "s", None, higher_is_better=False,
                  params=params)


if __name__ == "__main__":
    main()
