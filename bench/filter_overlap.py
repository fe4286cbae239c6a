"""filter-overlap: two artifacts of one repository sharing their weights, with different
patterns (the first without the README and the license, the second the whole repository), on
one node, one after the other.

Value: the second artifact's hub bytes / its size (target <= 0.05; every byte again before the
file store). Baseline in the same run: the first artifact's, from a cold cache (1.0). Each round
starts from an empty cache; the rounds' times to a published tree are reported too.
``BENCH_SCALE`` multiplies the shards' size.
"""

from __future__ import annotations

from typing import Any

from bench import _revisions, materialize_cold

FIGURES = ("filter-overlap",)
"""The figure this benchmark reports, through _revisions.compare."""

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
    _revisions.compare("filter-overlap", REPO, [repository(materialize_cold.scale())],
                       _revisions.Ask("first", ignore=FIRST_IGNORES), _revisions.Ask("second"),
                       ROUNDS)


if __name__ == "__main__":
    main()
