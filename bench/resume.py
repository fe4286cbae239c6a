"""resume: kill -9 the downloading process at about half of materialize-cold, restart, finish.

The value is what the hub served over the killed run and its resumption; the baseline is what it
served for an uninterrupted run, so the ratio is the share of useful bytes. Target: >= 0.99
(bytes fetched twice <= 1% of the total; ``refetched_percent`` in ``params``).
``BENCH_SCALE`` scales the large files (default 1: 2.5 GiB in all).

Interleaved rounds on one hub (killed and resumed, uninterrupted, killed and resumed,
uninterrupted; 2 rounds, as each moves about 5 GiB): the figures are each side's median bytes,
``params`` has each round's, and each round's ratio is reported.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import tempfile

from bench import materialize_cold, result

ROUNDS = 2


def _killed_and_resumed(hub: materialize_cold.Hub, digest: str, total: int,
                        work: pathlib.Path) -> dict[str, float]:
    """Kill -9 the download at about half, restart it, finish: what the hub served for both."""
    began = hub.bytes_served()
    first = materialize_cold.Downloader(work / "cache", hub, digest)
    received_at_kill = 0
    for line in first.lines():
        received_at_kill = int(line.get("received", 0))
        if received_at_kill >= total // 2:
            break
    first.kill()
    served_at_kill = hub.bytes_served() - began
    summary = materialize_cold.Downloader(work / "cache", hub, digest).finish()
    both = hub.bytes_served() - began
    materialize_cold.remove(work / "cache")
    return {"both": both, "received_at_kill": received_at_kill,
            "served_before_kill": served_at_kill, "resume_seconds": float(summary["seconds"])}


def _uninterrupted(hub: materialize_cold.Hub, digest: str, work: pathlib.Path) -> int:
    began = hub.bytes_served()
    materialize_cold.materialize(hub, work / "whole", digest)
    served = hub.bytes_served() - began
    materialize_cold.remove(work / "whole")
    return served


def main() -> None:
    files = materialize_cold.repository(materialize_cold.scale())
    total = sum(f["size"] for f in files.values())
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-resume-", dir=os.environ.get("BENCH_DIR")))
    resumed: list[dict[str, float]] = []
    whole: list[int] = []
    try:
        with materialize_cold.running_hub(files) as hub:
            digest = materialize_cold.digest_of(hub)
            for _ in range(ROUNDS):
                resumed.append(_killed_and_resumed(hub, digest, total, work))
                whole.append(_uninterrupted(hub, digest, work))
    finally:
        materialize_cold.remove(work)
    both = statistics.median(r["both"] for r in resumed)
    uninterrupted = statistics.median(whole)
    refetched = both - total
    result.report(
        "resume", both / 2**20, "MiB", uninterrupted / 2**20, higher_is_better=False,
        params={
            "total_bytes": total,
            "refetched_bytes": int(refetched),
            "refetched_percent": round(100.0 * refetched / total, 3),
            "received_at_kill": int(statistics.median(r["received_at_kill"] for r in resumed)),
            "served_before_kill": int(statistics.median(r["served_before_kill"]
                                                        for r in resumed)),
            "resume_seconds": round(statistics.median(r["resume_seconds"] for r in resumed), 2),
            "scale": materialize_cold.scale(),
            "target": "ratio >= 0.99 (re-fetched <= 1% of the total)",
            "rounds": ROUNDS,
            "refetched_percent_rounds": [round(100.0 * (r["both"] - total) / total, 3)
                                         for r in resumed],
            "served_rounds_bytes": [int(r["both"]) for r in resumed],
            "uninterrupted_rounds_bytes": whole,
            "received_at_kill_rounds": [int(r["received_at_kill"]) for r in resumed],
        },
        rounds=[(r["both"] / 2**20, w / 2**20) for r, w in zip(resumed, whole, strict=True)],
    )


if __name__ == "__main__":
    main()
