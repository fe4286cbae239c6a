"""How a benchmark reports: one line on stdout and bench/results/<name>.json."""

from __future__ import annotations

import json
import pathlib
import statistics
from collections.abc import Sequence
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
    rounds: Sequence[tuple[float, float]] = (),
) -> dict[str, Any]:
    """Print and store one figure; ratio > 1 always means "better than the baseline".

    ``rounds``: (value, baseline) of each interleaved round (A, B, A, B ...); their ratios'
    median and spread are printed and stored, so a noisy neighbour shows as a wide spread instead
    of a skewed figure."""
    ratio = _ratio(value, baseline, higher_is_better)
    per_round = [r for r in (_ratio(v, b, higher_is_better) for v, b in rounds) if r is not None]
    result = {
        "name": name,
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "ratio": ratio,
        "params": params or {},
    }
    if per_round:
        result["round_ratios"] = [round(r, 3) for r in per_round]
        result["median_round_ratio"] = round(statistics.median(per_round), 3)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    shown = f"{ratio:.2f}x" if ratio is not None else "-"
    base = f"{baseline:.4g}" if baseline is not None else "-"
    spread = (f" rounds={len(per_round)} median={statistics.median(per_round):.2f}x "
              f"spread={min(per_round):.2f}-{max(per_round):.2f}x" if per_round else "")
    print(f"{name:<22} value={value:.4g} {unit:<8} baseline={base:<10} ratio={shown}{spread}")
    return result


def _ratio(value: float, baseline: float | None, higher_is_better: bool) -> float | None:
    if not baseline:
        return None
    if higher_is_better:
        return value / baseline
    return baseline / value if value else None
