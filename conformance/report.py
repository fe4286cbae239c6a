"""The report: one line per rule, then the totals."""

from __future__ import annotations

import json
from collections.abc import Sequence

from conformance.plugin import Outcome

LABEL = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}


def text(outcomes: Sequence[Outcome], endpoint: str) -> str:
    lines = [f"conformance of worker.gpustack.ai/v1 at {endpoint}", ""]
    width = max((len(o.rule) for o in outcomes), default=10)
    for o in outcomes:
        line = f"{LABEL[o.outcome]}  {o.rule.ljust(width)}  {o.text}"
        if o.reason:
            line += f"\n      {'' if o.outcome == 'pass' else o.outcome + ': '}{o.reason}"
        lines.append(line)
    counts = {kind: sum(o.outcome == kind for o in outcomes) for kind in LABEL}
    lines += ["", f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"]
    return "\n".join(lines) + "\n"


def as_json(outcomes: Sequence[Outcome], endpoint: str) -> str:
    results = [
        {"rule": o.rule, "text": o.text, "outcome": o.outcome, "reason": o.reason} for o in outcomes
    ]
    return json.dumps({"endpoint": endpoint, "results": results}, indent=2)
