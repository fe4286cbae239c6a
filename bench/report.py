"""report: the status reporter with 50 concurrent downloads on one node for 10 minutes of fake
time (a manual clock ticking every 5 s), composing from the real pieces (cache inventory, usage
records, references, failure records, the capacity ledger).

Figures: progress writes per minute (target <= 2, the rule) against what writing on every tick
would cost (12 a minute), and the reporter's CPU per minute of fake time against composing
alone (the floor: the report must at least look at the node).

The CPU figures come from interleaved rounds: the 10 minutes run as 5 rounds of 2, each round's
reporter ticks followed by as many composes at the same fake time (report, compose, report,
compose ...); reported are the medians of each side's per-minute CPU over the rounds, and each
round's ratio. The writes figure has no rounds: its baseline, 12 a minute, is computed from the
tick, not measured.
"""

from __future__ import annotations

import asyncio
import pathlib
import random
import statistics
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from bench import result
from devkit import clock as manualclock
from nodeplugin.cache import inventory, layout, quarantine, refs, trees, usage
from nodeplugin.materialize import capacity, interface
from nodeplugin.materialize import failures as failure_records
from nodeplugin.nodestore import apply, compose, reporter, watermarks
from nodeplugin.nodestore import spec as specs

DOWNLOADS = 50
MINUTES = 10
ROUNDS = 5
TOTAL = 4 * 10**12


class Downloads:
    """50 running attempts moving at their own pace (a Materializer as the composer sees it)."""

    def __init__(self, rng: random.Random) -> None:
        self.sizes = {f"sha256:{i:064x}": rng.randrange(10**9, 2 * 10**11)
                      for i in range(DOWNLOADS)}
        self.rates = {d: size / rng.randrange(600, 6000) for d, size in self.sizes.items()}
        self.received = dict.fromkeys(self.sizes, 0)

    def advance(self, seconds: float) -> None:
        for digest, rate in self.rates.items():
            self.received[digest] = min(self.sizes[digest],
                                        int(self.received[digest] + rate * seconds))

    def running(self) -> list[interface.Progress]:
        return [interface.Progress(d, interface.State.DOWNLOADING, self.received[d], size)
                for d, size in self.sizes.items()]

    async def ensure(self, request: interface.Request) -> interface.Progress:
        raise AssertionError("the report benchmark drives its downloads itself; nothing mounts")

    @property
    def downloaded_bytes(self) -> int:
        return sum(self.received.values())

    def add_done_callback(self, callback: interface.DoneCallback) -> None:
        return None

    async def close(self) -> None:
        return None


async def _run(base: pathlib.Path) -> dict[str, Any]:
    rng = random.Random(11)
    clock = manualclock.ManualClock()
    cache = layout.Layout(base / "cache")
    cache.create()
    downloads = Downloads(rng)
    ledger = capacity.Capacity(
        cache.root, usage=lambda root: capacity.Usage(TOTAL, 10**12 + downloads.downloaded_bytes))
    node = apply.NodeState(present=True, observed_generation=1)
    node.applied = specs.parse({"metadata": {"name": "bench", "generation": 1}, "spec": {}})
    node.effective = watermarks.effective(80, 70, None, total_bytes=TOTAL, shared=False)
    composer = compose.Composer(
        node=node, stock=inventory.Inventory(cache), tree_facts=trees.Trees(cache),
        materializer=downloads, failures=failure_records.Failures(cache),
        quarantined=quarantine.Quarantine(cache), references=refs.References(),
        usage_store=usage.UsageStore(cache.state_file(usage.FILE_NAME), clock=clock.now),
        ledger=ledger, clock=clock,
        verdicts=compose.Verdicts(skipped=lambda: None, nothing_to_remove=lambda: False),
    )  # fmt: skip
    written: list[float] = []

    async def write(status: Mapping[str, Any]) -> None:
        written.append(clock.monotonic())

    report = reporter.Reporter(composer.compose, write, clock=clock)
    ticks = int(MINUTES * 60 / reporter.TICK_SECONDS)
    await report.report()
    rounds: list[tuple[float, float]] = []
    for r in range(ROUNDS):
        cpu = 0.0
        for _ in range(ticks * (r + 1) // ROUNDS - ticks * r // ROUNDS):
            clock.advance(reporter.TICK_SECONDS)
            downloads.advance(reporter.TICK_SECONDS)
            began = time.process_time()
            await report.report()
            cpu += time.process_time() - began
        # The floor: composing alone, the same number of times, at the same fake time.
        floor = 0.0
        for _ in range(ticks * (r + 1) // ROUNDS - ticks * r // ROUNDS):
            began = time.process_time()
            await composer.compose()
            floor += time.process_time() - began
        rounds.append((cpu * ROUNDS / MINUTES, floor * ROUNDS / MINUTES))
    per_minute = [sum(1 for t in report.write_times if m * 60 <= t < (m + 1) * 60)
                  for m in range(MINUTES)]
    return {
        "progress_writes_per_minute": report.progress_writes / MINUTES,
        "writes_per_minute_max": max(per_minute),
        "writes_total": report.writes,
        "progress_writes": report.progress_writes,
        "cpu_per_minute_s": statistics.median(c for c, _ in rounds),
        "compose_cpu_per_minute_s": statistics.median(f for _, f in rounds),
        "cpu_per_minute_rounds_s": [round(c, 6) for c, _ in rounds],
        "compose_cpu_per_minute_rounds_s": [round(f, 6) for _, f in rounds],
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as base:
        figures = asyncio.run(_run(pathlib.Path(base)))
    every_tick = 60 / reporter.TICK_SECONDS
    params = {"downloads": DOWNLOADS, "minutes": MINUTES, "rounds": ROUNDS,
              "tick_s": reporter.TICK_SECONDS,
              "target_progress_writes_per_minute": reporter.PER_MINUTE, **figures}
    result.report("report", figures["progress_writes_per_minute"], "writes/min", every_tick,
                  higher_is_better=False, params=params)
    result.report("report-cpu", figures["cpu_per_minute_s"], "s/min",
                  figures["compose_cpu_per_minute_s"], higher_is_better=False, params=params,
                  rounds=list(zip(figures["cpu_per_minute_rounds_s"],
                                  figures["compose_cpu_per_minute_rounds_s"], strict=True)))


if __name__ == "__main__":
    main()
