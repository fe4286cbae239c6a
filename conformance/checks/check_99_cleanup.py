"""Last: everything the run created is removed."""

from __future__ import annotations

from conformance.fixtures import Run
from conformance.rules import rule


@rule("cleanup", "every object the run created is deleted (artifacts by label, its namespaces)")
def check_cleanup(conformance_run: Run) -> None:
    remaining = conformance_run.cleanup()
    assert remaining == [], f"left behind: {remaining}"
    assert conformance_run.leftovers() == []
