"""The pytest plugin behind ``python -m conformance``: fixtures and the pass/fail/skip ledger."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterator

import pytest

from conformance.api import Api
from conformance.fixtures import Run
from conformance.kubectl import Kubectl
from conformance.settings import Settings


@dataclasses.dataclass
class Outcome:
    rule: str
    text: str
    outcome: str
    """pass, fail or skip."""
    reason: str = ""


Note = Callable[[str], None]
"""The ``note`` fixture: a check records something the operator should read even when it
passes (printed under the rule's line)."""
NOTE = "conformance.note"


class Plugin:
    def __init__(self, options: Settings) -> None:
        self.options = options
        self.outcomes: list[Outcome] = []
        self.run: Run | None = None

    # fixtures -------------------------------------------------------------------------------

    @pytest.fixture(scope="session")
    def conformance_run(self) -> Iterator[Run]:
        run = Run(self.options)
        self.run = run
        try:
            yield run
        finally:
            run.close()

    @pytest.fixture(scope="session")
    def admin(self, conformance_run: Run) -> Api:
        return conformance_run.admin

    @pytest.fixture
    def kubectl(self, conformance_run: Run) -> Kubectl:
        if not conformance_run.kubectl.available:
            pytest.skip(f"{self.options.kubectl!r} not found on PATH (kubectl checks need it)")
        return conformance_run.kubectl

    @pytest.fixture
    def tenant(self, conformance_run: Run) -> Api:
        tenant = conformance_run.tenant()
        if tenant is None:
            pytest.skip("no --tenant-kubeconfig given")
        return tenant

    @pytest.fixture
    def get_only_user(self, conformance_run: Run) -> str:
        if self.options.get_only_user is None:
            pytest.skip("no --get-only-user given")
        return self.options.get_only_user

    @pytest.fixture
    def note(self, request: pytest.FixtureRequest) -> Note:
        def add(text: str) -> None:
            request.node.user_properties.append((NOTE, text))

        return add

    # the ledger -----------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self._note(item, call, report)
        return report

    def _note(
        self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
    ) -> None:
        marker = item.get_closest_marker("rule")
        rule_id, text = marker.args if marker else (item.name, "")
        if report.when == "call" or report.outcome != "passed":
            if report.skipped:
                reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
                reason = reason.removeprefix("Skipped: ")
                self._record(Outcome(rule_id, text, "skip", reason))
            elif report.failed:
                message = getattr(call.excinfo, "value", None)
                detail = str(message).strip().splitlines()[0] if message else report.when
                self._record(Outcome(rule_id, text, "fail", detail[:300]))
            elif report.when == "call":
                notes = [str(value) for key, value in item.user_properties if key == NOTE]
                self._record(Outcome(rule_id, text, "pass", "; ".join(notes)))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            detail = str(report.longrepr).strip().splitlines()[-1:] or ["collection failed"]
            self._record(Outcome(f"collect:{report.nodeid}", "the checks load", "fail",
                                 detail[0][:300]))  # fmt: skip

    def _record(self, outcome: Outcome) -> None:
        # a failure in teardown after a pass replaces the pass
        if self.outcomes and self.outcomes[-1].rule == outcome.rule:
            if outcome.outcome == "fail":
                self.outcomes[-1] = outcome
            return
        self.outcomes.append(outcome)
