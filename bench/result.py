"""How a benchmark reports: one line on stdout and bench/results/<name>.json."""

from __future__ import annotations

import json
import pathlib
from typing import Any

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def report(
    name: str,
    value: float,
    unit: str,
    baseline: float | None,
    *,
    higher_is_better: bool,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Print and store one figure; ratio > 1 always means "better than the baseline"."""
    ratio: float | None = None
    if baseline:
        ratio = value / baseline if higher_is_better else baseline / value if value else None
    result = {
        "name": name,
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "ratio": ratio,
        "params": params or {},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    shown = f"{ratio:.2f}x" if ratio is not None else "-"
    base = f"{baseline:.4g}" if baseline is not None else "-"
    print(f"{name:<22} value={value:.4g} {unit:<8} baseline={base:<10} ratio={shown}")
    return result
