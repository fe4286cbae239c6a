"""Learning the worker identity until learned: attempts with the queue's backoff, each failure
counted and kept as the reason, readiness failing until then, the controllers started after."""

from __future__ import annotations

import asyncio

from prometheus_client import registry

from controllers.runtime import identity
from devkit import clock as manual


class Answers:
    """An attempt answering from a script ("" learns it)."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def __call__(self) -> str:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _figures(learning: identity.Learning) -> dict[str, float | None]:
    found = registry.CollectorRegistry()
    found.register(learning)
    return {name: found.get_sample_value(name) for name in
            (identity.FAILURES + "_total", identity.KNOWN)}


async def test_failures_back_off_until_one_attempt_learns_it() -> None:
    clock = manual.ManualClock()
    answers = Answers("the SelfSubjectReview failed: kube-apiserver answered 503",
                      RuntimeError("a bug"), "")
    learning = identity.Learning(answers, clock)
    started: list[str] = []
    assert learning.failing() == identity.NOT_YET
    waiting = asyncio.create_task(learning.then(lambda: started.append("controllers")))
    running = asyncio.create_task(learning.run())
    await _settle()
    assert answers.asked == 1 and not learning.known and started == []
    assert learning.failing() == "the SelfSubjectReview failed: kube-apiserver answered 503"
    assert _figures(learning) == {identity.FAILURES + "_total": 1, identity.KNOWN: 0}
    assert clock.pending() == [identity.BACKOFF.delay(1)]
    clock.advance(identity.BACKOFF.delay(1))
    await _settle()
    assert answers.asked == 2 and learning.failures == 2
    assert learning.failing() == "learning it failed unexpectedly (RuntimeError)"
    assert clock.pending() == [identity.BACKOFF.delay(2)] == [2.0]  # doubling
    clock.advance(2.0)
    await asyncio.wait_for(running, 1)
    await asyncio.wait_for(waiting, 1)
    assert learning.known and learning.failing() == "" and started == ["controllers"]
    assert _figures(learning) == {identity.FAILURES + "_total": 2, identity.KNOWN: 1}
    assert clock.pending() == []


async def test_a_first_attempt_that_learns_it_starts_at_once() -> None:
    clock = manual.ManualClock()
    learning = identity.Learning(Answers(""), clock)
    assert await learning.first()
    await asyncio.wait_for(learning.run(), 1)  # nothing more to ask
    started: list[int] = []
    await asyncio.wait_for(learning.then(lambda: started.append(1)), 1)
    assert started == [1] and learning.failures == 0


async def test_the_backoff_is_capped_and_the_reason_bounded() -> None:
    clock = manual.ManualClock()
    long = "x" * 1000
    learning = identity.Learning(Answers(*([long] * 9)), clock)
    assert not await learning.first()
    task = asyncio.create_task(learning.run())
    for _ in range(7):
        await _settle()
        clock.advance(clock.pending()[0])
    await _settle()
    assert learning.failures == 8
    assert clock.pending() == [identity.BACKOFF.cap] == [60.0]
    assert learning.failing() == "x" * identity.REASON_LIMIT
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
