"""materialize-memory: peak RSS of the downloading process, with 1 GiB and with 4 GiB files.

The same repository shape as materialize-cold (two big LFS files, one half their size, 30 small
files), downloaded by a separate process (``bench.materialize_cold drive``); its peak RSS is its
own ``VmHWM`` (``materialize_cold.peak_rss_bytes``; ``ru_maxrss`` would include the peak of the
runner that started it). The value is the peak with 4 GiB files, the baseline the peak with 1 GiB
files, so a ratio near 1.0 means memory is flat in model size; the target is a peak <= 150 MiB.
``BENCH_SCALE`` scales both sizes (the 4 GiB run alone moves 10 GiB through the disk).
"""

from __future__ import annotations

import os
import pathlib
import tempfile

from bench import materialize_cold, result

MiB = 1 << 20
GiB = 1 << 30


def peak_rss(big: int, work: pathlib.Path) -> tuple[int, float]:
    files = materialize_cold.repository(materialize_cold.scale(), big=big)
    with materialize_cold.running_hub(files) as hub:
        digest = materialize_cold.digest_of(hub)
        summary = materialize_cold.materialize(hub, work / "cache", digest)
    materialize_cold.remove(work / "cache")
    return int(summary["peak_rss_bytes"]), float(summary["seconds"])


def main() -> None:
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-memory-", dir=os.environ.get("BENCH_DIR")))
    try:
        small, small_seconds = peak_rss(1 * GiB, work)
        large, large_seconds = peak_rss(4 * GiB, work)
    finally:
        materialize_cold.remove(work)
    result.report(
        "materialize-memory", large / MiB, "MiB", small / MiB, higher_is_better=False,
        params={
            "big_file_bytes": [int(1 * GiB * materialize_cold.scale()),
                               int(4 * GiB * materialize_cold.scale())],
            "peak_rss_mib": [round(small / MiB, 1), round(large / MiB, 1)],
            "seconds": [round(small_seconds, 2), round(large_seconds, 2)],
            "scale": materialize_cold.scale(),
            "target_mib": 150,
        },
    )


if __name__ == "__main__":
    main()
