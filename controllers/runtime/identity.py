"""Learning the worker identity until it is learned: one attempt, then again after a backoff
(``BACKOFF``: 1 s doubling to a minute) for as long as it fails, each failure logged and
counted. Until it is learned the controllers wait and readiness fails saying why.

The attempt is the caller's: the API server asks kube-apiserver who it is (SelfSubjectReview,
else a TokenReview of its own token; ``apiserver.auth.worker``); ``python -m controllers`` asks
the API it writes status to (a SelfSubjectReview). A transient failure (kube-apiserver
restarting, a 503) thus heals by itself, and a lasting one stays visible: ``/readyz`` names it,
``gpustack_model_manager_worker_identity_failures_total`` counts the attempts that failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import core as prometheus_core

from timing import backoff as backoffs
from timing import clock as clocks

log = logging.getLogger(__name__)

BACKOFF = backoffs.Backoff(1.0, 60.0)
CHECK = "worker-identity"
"""The readiness check's name (``[-]worker-identity failed: ...``)."""
FAILURES = "gpustack_model_manager_worker_identity_failures"
KNOWN = "gpustack_model_manager_worker_identity_known"
NOT_YET = "the worker identity has not been learned yet"
REASON_LIMIT = 300
"""Characters of a reason shown by readiness (the attempt's reasons are short already)."""

Attempt = Callable[[], Awaitable[str]]
"""One try: "" once the identity is learned, else why it is not (short, no secret)."""


class Learning:
    """The worker identity's learning: ``first`` makes one attempt, ``run`` keeps trying with
    backoff until one succeeds; ``learned`` is set then."""

    name = CHECK

    def __init__(self, attempt: Attempt, clock: clocks.Clock, *,
                 backoff: backoffs.Backoff = BACKOFF) -> None:
        self._attempt = attempt
        self._clock = clock
        self._backoff = backoff
        self.reason = NOT_YET
        """Why the identity is not known ("" once it is)."""
        self.failures = 0
        """Attempts that failed (the metric)."""
        self.learned = asyncio.Event()

    @property
    def known(self) -> bool:
        return self.learned.is_set()

    def failing(self) -> str:
        """The readiness check: "" once learned, else why not."""
        return "" if self.known else self.reason[:REASON_LIMIT]

    async def first(self) -> bool:
        """One attempt; True when it learned the identity."""
        if self.known:
            return True
        try:
            why = await self._attempt()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an attempt that breaks must not end the learning
            log.exception("learning the worker identity failed unexpectedly")
            why = f"learning it failed unexpectedly ({type(exc).__name__})"
        if not why:
            self.reason = ""
            self.learned.set()
            return True
        self.failures += 1
        self.reason = why
        log.error("worker identity unknown (attempt %d; the controllers wait): %s; asking again "
                  "in %.0fs", self.failures, why, self._backoff.delay(self.failures))
        return False

    async def run(self) -> None:
        """Attempt until learned (the first attempt at once unless ``first`` made it)."""
        if self.failures == 0 and await self.first():
            return
        while not self.known:
            await clocks.sleep(self._clock, self._backoff.delay(self.failures))
            if await self.first():
                log.info("worker identity learned after %d failed attempts; the controllers "
                         "start", self.failures)

    async def then(self, start: Callable[[], None]) -> None:
        """Call ``start`` once the identity is learned (at once when it is)."""
        await self.learned.wait()
        start()

    def collect(self) -> Iterator[prometheus_core.Metric]:
        """A prometheus collector: failed attempts, and whether the identity is known."""
        failed = prometheus_core.CounterMetricFamily(
            FAILURES, "Attempts to learn the worker identity that failed (each one logged).")
        failed.add_metric([], self.failures)
        yield failed
        yield prometheus_core.GaugeMetricFamily(
            KNOWN, "1 once the worker identity is learned (the controllers run), else 0.",
            value=1 if self.known else 0)
