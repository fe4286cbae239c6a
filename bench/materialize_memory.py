"""materialize-memory: peak RSS of the downloading process, with 1 GiB and with 4 GiB files.

The same repository shape as materialize-cold (two big LFS files, one half their size, 30 small
files), downloaded by a separate process (``bench.materialize_cold drive``); its peak RSS is its
own ``VmHWM`` (``materialize_cold.peak_rss_bytes``; ``ru_maxrss`` would include the peak of the
runner that started it). The value is the peak with 4 GiB files, the baseline the peak with 1 GiB
files, so a ratio near 1.0 means memory is flat in model size; the target is a peak <= 150 MiB.
``BENCH_SCALE`` scales both sizes (the 4 GiB run alone moves 10 GiB through the disk).

Both hubs run side by side and the downloads interleave in 2 rounds (4 GiB, 1 GiB, 4 GiB,
1 GiB; two because a round moves 12.5 GiB): the figures are each size's median peak, and each
round's ratio is reported.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import statistics
import tempfile

from bench import materialize_cold, result

MiB = 1 << 20
GiB = 1 << 30


ROUNDS = 2


def peak_rss(hub: materialize_cold.Hub, digest: str, work: pathlib.Path) -> tuple[int, float]:
    summary = materialize_cold.materialize(hub, work / "cache", digest)
    materialize_cold.remove(work / "cache")
    return int(summary["peak_rss_bytes"]), float(summary["seconds"])


def main() -> None:
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-memory-", dir=os.environ.get("BENCH_DIR")))
    sizes = (4 * GiB, 1 * GiB)  # the subject first in each round, then the baseline
    runs: dict[int, list[tuple[int, float]]] = {size: [] for size in sizes}
    try:
        with contextlib.ExitStack() as stack:
            hubs = {size: stack.enter_context(materialize_cold.running_hub(
                materialize_cold.repository(materialize_cold.scale(), big=size)))
                for size in sizes}
            digests = {size: materialize_cold.digest_of(hub) for size, hub in hubs.items()}
            for _ in range(ROUNDS):
                for size in sizes:
                    runs[size].append(peak_rss(hubs[size], digests[size], work))
    finally:
        materialize_cold.remove(work)
    small = statistics.median(peak for peak, _ in runs[1 * GiB])
    large = statistics.median(peak for peak, _ in runs[4 * GiB])
    small_seconds = statistics.median(seconds for _, seconds in runs[1 * GiB])
    large_seconds = statistics.median(seconds for _, seconds in runs[4 * GiB])
    result.report(
        "materialize-memory", large / MiB, "MiB", small / MiB, higher_is_better=False,
        params={
            "big_file_bytes": [int(1 * GiB * materialize_cold.scale()),
                               int(4 * GiB * materialize_cold.scale())],
            "peak_rss_mib": [round(small / MiB, 1), round(large / MiB, 1)],
            "seconds": [round(small_seconds, 2), round(large_seconds, 2)],
            "scale": materialize_cold.scale(),
            "target_mib": 150,
            "rounds": ROUNDS,
            "peak_rss_rounds_mib": [[round(s / MiB, 1) for s, _ in runs[1 * GiB]],
                                    [round(s / MiB, 1) for s, _ in runs[4 * GiB]]],
            "seconds_rounds": [[round(t, 2) for _, t in runs[1 * GiB]],
                               [round(t, 2) for _, t in runs[4 * GiB]]],
        },
        rounds=[(a / MiB, b / MiB) for (a, _), (b, _)
                in zip(runs[4 * GiB], runs[1 * GiB], strict=True)],
    )


if __name__ == "__main__":
    main()
