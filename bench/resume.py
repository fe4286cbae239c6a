"""resume: kill -9 the downloading process at about half of materialize-cold, restart, finish.

The value is what the hub served over the killed run and its resumption; the baseline is what it
served for an uninterrupted run, so the ratio is the share of useful bytes. Target: >= 0.99
(bytes fetched twice <= 1% of the total; ``refetched_percent`` in ``params``).
``BENCH_SCALE`` scales the large files (default 1: 2.5 GiB in all).
"""

from __future__ import annotations

import os
import pathlib
import tempfile

from bench import materialize_cold, result


def main() -> None:
    files = materialize_cold.repository(materialize_cold.scale())
    total = sum(f["size"] for f in files.values())
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-resume-", dir=os.environ.get("BENCH_DIR")))
    try:
        with materialize_cold.running_hub(files) as hub:
            digest = materialize_cold.digest_of(hub)
            materialize_cold.materialize(hub, work / "whole", digest)
            uninterrupted = hub.bytes_served()
            materialize_cold.remove(work / "whole")

            first = materialize_cold.Downloader(work / "cache", hub, digest)
            received_at_kill = 0
            for line in first.lines():
                received_at_kill = int(line.get("received", 0))
                if received_at_kill >= total // 2:
                    break
            first.kill()
            served_at_kill = hub.bytes_served() - uninterrupted
            summary = materialize_cold.Downloader(work / "cache", hub, digest).finish()
            both = hub.bytes_served() - uninterrupted
    finally:
        materialize_cold.remove(work)
    refetched = both - total
    result.report(
        "resume", both / 2**20, "MiB", uninterrupted / 2**20, higher_is_better=False,
        params={
            "total_bytes": total,
            "refetched_bytes": refetched,
            "refetched_percent": round(100.0 * refetched / total, 3),
            "received_at_kill": received_at_kill,
            "served_before_kill": served_at_kill,
            "resume_seconds": round(float(summary["seconds"]), 2),
            "scale": materialize_cold.scale(),
            "target": "ratio >= 0.99 (re-fetched <= 1% of the total)",
        },
    )

if __name__ == "__main__":
    main()
