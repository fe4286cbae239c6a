"""revision-delta: a node holding revision 1 of a model (four 256 MiB shards and small files)
materializes revision 2, which changes one small file (``config.json``).

Value: the hub's bytes for revision 2 / revision 2's size (target <= 0.01; every byte again
before the file store). Baseline in the same run: revision 1's, from a cold cache (1.0). Each
round starts from an empty cache: revision 1 cold, then revision 2 on top of it; the rounds'
times to a published tree are reported too (revision 2 against revision 1). ``BENCH_SCALE``
multiplies the shards' size.
"""

from __future__ import annotations

from typing import Any

from bench import _revisions, materialize_cold

FIGURES = ("revision-delta",)
"""The figure this benchmark reports, through _revisions.compare."""

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
    _revisions.compare("revision-delta", REPO, revisions(materialize_cold.scale()),
                       _revisions.Ask("rev1", revision=0), _revisions.Ask("rev2", revision=1),
                       ROUNDS)


if __name__ == "__main__":
    main()
