"""The conformance report: one line per rule with its outcome and reason, then totals."""

from __future__ import annotations

import json

from conformance import report
from conformance.plugin import Outcome

OUTCOMES = [
    Outcome("discovery.legacy", "lists the resources", "pass"),
    Outcome("status.artifact-guard", "non-worker status writes are 403", "fail", "got 200"),
    Outcome("tenant.reads-own", "the tenant reads its namespace", "skip",
            "no --tenant-kubeconfig given"),
]


def test_text_report() -> None:
    text = report.text(OUTCOMES, "https://example.test")
    lines = text.splitlines()
    assert lines[0] == "conformance of worker.gpustack.ai/v1 at https://example.test"
    assert lines[2].startswith("PASS  discovery.legacy ")
    assert lines[3].startswith("FAIL  status.artifact-guard ")
    assert lines[4].strip() == "fail: got 200"
    assert lines[5].startswith("SKIP  tenant.reads-own ")
    assert lines[6].strip() == "skip: no --tenant-kubeconfig given"
    assert lines[-1] == "1 passed, 1 failed, 1 skipped"


def test_json_report() -> None:
    body = json.loads(report.as_json(OUTCOMES, "https://example.test"))
    assert body["endpoint"] == "https://example.test"
    assert [r["outcome"] for r in body["results"]] == ["pass", "fail", "skip"]
    assert body["results"][1] == {"rule": "status.artifact-guard",
                                  "text": "non-worker status writes are 403",
                                  "outcome": "fail", "reason": "got 200"}
