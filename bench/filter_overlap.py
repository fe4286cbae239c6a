"""filter-overlap: two artifacts of one repository sharing their weights, with different
patterns (the first without the README and the license, the second the whole repository), on
one node, one after the other.

Value: the second artifact's hub bytes / its size (target <= 0.05; every byte again before the
file store). Baseline in the same run: the first artifact's, from a cold cache (1.0). Each round
starts from an empty cache; the rounds' times to a published tree are reported too.
``BENCH_SCALE`` multiplies the shards' size.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import tempfile
from typing import Any

from bench import _revisions, materialize_cold, result

REPO = "bench/overlap-model"
MiB = 1 << 20
ROUNDS = 3
FIRST_IGNORES = "*.md,LICENSE"


def repository(scale: float = 1.0) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {
        f"model-{i:05d}-of-00002.safetensors": {"size": int(256 * MiB * scale), "lfs": True}
        for i in range(1, 3)
    }
    files.update({
        "config.json": {"size": 700, "lfs": False},
        "tokenizer.json": {"size": 2 * MiB, "lfs": False},
        "README.md": {"size": 9_000, "lfs": False},
        "LICENSE": {"size": 11_000, "lfs": False},
    })
    return files


def main() -> None:
    files = repository(materialize_cold.scale())
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-ovl-", dir=os.environ.get("BENCH_DIR")))
    rounds: list[dict[str, float]] = []
    try:
        with _revisions.running_hub(REPO, [files]) as hub:
            (commit,) = hub.commits
            first, size1 = _revisions.digest_of(hub, commit, ignore=FIRST_IGNORES)
            second, size2 = _revisions.digest_of(hub, commit)
            for index in range(ROUNDS):
                root = work / f"cache-{index}"
                cold, cold_bytes = _revisions.materialize(hub, root, commit, first,
                                                          ignore=FIRST_IGNORES)
                warm, warm_bytes = _revisions.materialize(hub, root, commit, second)
                rounds.append({"first_seconds": cold, "second_seconds": warm,
                               "first_ratio": cold_bytes / size1,
                               "second_ratio": warm_bytes / size2,
                               "second_bytes": warm_bytes})
                materialize_cold.remove(root)

        def median(key: str) -> float:
            return statistics.median(r[key] for r in rounds)

        params = {
            "rounds": ROUNDS, "first_bytes": size1, "second_bytes": size2,
            "scale": materialize_cold.scale(),
            "second_hub_bytes": [int(r["second_bytes"]) for r in rounds],
            "first_seconds": [round(r["first_seconds"], 3) for r in rounds],
            "second_seconds": [round(r["second_seconds"], 3) for r in rounds],
            "median_first_seconds": round(median("first_seconds"), 3),
            "median_second_seconds": round(median("second_seconds"), 3),
        }
        result.report("filter-overlap", median("second_ratio"), "ratio", median("first_ratio"),
                      higher_is_better=False, params=params)
    finally:
        materialize_cold.remove(work)


if __name__ == "__main__":
    main()
