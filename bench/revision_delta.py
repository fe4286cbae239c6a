"""revision-delta: a node holding revision 1 of a model (four 256 MiB shards and small files)
materializes revision 2, which changes one small file (``config.json``).

Value: the hub's bytes for revision 2 / revision 2's size (target <= 0.01; every byte again
before the file store). Baseline in the same run: revision 1's, from a cold cache (1.0). Each
round starts from an empty cache: revision 1 cold, then revision 2 on top of it; the rounds'
times to a published tree are reported too (revision 2 against revision 1). ``BENCH_SCALE``
multiplies the shards' size.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import tempfile
from typing import Any

from bench import _revisions, materialize_cold, result

REPO = "bench/revision-model"
MiB = 1 << 20
ROUNDS = 3


def revisions(scale: float = 1.0) -> list[dict[str, dict[str, Any]]]:
    first: dict[str, dict[str, Any]] = {
        f"model-{i:05d}-of-00004.safetensors": {"size": int(256 * MiB * scale), "lfs": True}
        for i in range(1, 5)
    }
    first.update({
        "model.safetensors.index.json": {"size": 24_000, "lfs": False},
        "tokenizer.json": {"size": 2 * MiB, "lfs": False},
        "tokenizer_config.json": {"size": 3_000, "lfs": False},
        "generation_config.json": {"size": 200, "lfs": False},
        "config.json": {"size": 700, "lfs": False, "seed": "config-1"},
        "README.md": {"size": 6_000, "lfs": False},
    })
    second = {**first, "config.json": {"size": 701, "lfs": False, "seed": "config-2"}}
    return [first, second]


def main() -> None:
    revs = revisions(materialize_cold.scale())
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-rev-", dir=os.environ.get("BENCH_DIR")))
    rounds: list[dict[str, float]] = []
    try:
        with _revisions.running_hub(REPO, revs) as hub:
            one, two = hub.commits
            digest1, size1 = _revisions.digest_of(hub, one)
            digest2, size2 = _revisions.digest_of(hub, two)
            for index in range(ROUNDS):
                root = work / f"cache-{index}"
                cold, cold_bytes = _revisions.materialize(hub, root, one, digest1)
                warm, warm_bytes = _revisions.materialize(hub, root, two, digest2)
                rounds.append({"rev1_seconds": cold, "rev2_seconds": warm,
                               "rev1_ratio": cold_bytes / size1,
                               "rev2_ratio": warm_bytes / size2, "rev2_bytes": warm_bytes})
                materialize_cold.remove(root)

        def median(key: str) -> float:
            return statistics.median(r[key] for r in rounds)

        params = {
            "rounds": ROUNDS, "model_bytes": size2, "scale": materialize_cold.scale(),
            "rev2_hub_bytes": [int(r["rev2_bytes"]) for r in rounds],
            "rev1_seconds": [round(r["rev1_seconds"], 3) for r in rounds],
            "rev2_seconds": [round(r["rev2_seconds"], 3) for r in rounds],
            "time_ratio_rev1_over_rev2": [round(r["rev1_seconds"] / r["rev2_seconds"], 1)
                                          for r in rounds],
            "median_rev1_seconds": round(median("rev1_seconds"), 3),
            "median_rev2_seconds": round(median("rev2_seconds"), 3),
        }
        result.report("revision-delta", median("rev2_ratio"), "ratio", median("rev1_ratio"),
                      higher_is_better=False, params=params)
    finally:
        materialize_cold.remove(work)


if __name__ == "__main__":
    main()
