"""The one backoff: each former site's waits, unchanged; jitter within its bounds; no overflow."""

from __future__ import annotations

import math

import pytest

from apiserver.auth import webhook
from controllers.resolver import verdict
from controllers.runtime import identity, queue
from kube import informer
from nodeplugin.materialize import failures as failure_records
from nodeplugin.materialize import ranges
from timing import backoff as backoffs

SITES = {
    # a key's failed reconciles (docs/controllers.md: 1 s doubling to 5 min)
    "queue": (queue.DEFAULT_BACKOFF, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]),
    # failed lists and watches (docs/controllers.md, docs/nodeplugin.md: 0.5 s doubling to 30 s)
    "informer": (informer.BACKOFF, [0.5, 1, 2, 4, 8, 16, 30, 30]),
    # a digest's failed downloads (docs/nodeplugin.md: 1 min doubling to 1 h)
    "materialize": (failure_records.RETRY, [60, 120, 240, 480, 960, 1920, 3600, 3600]),
    # a range request's failures in a row
    "ranges": (ranges.Policy().retry, [0.5, 1, 2, 4, 8, 16, 30, 30]),
    # a refused resolution, before the revalidation interval caps it
    "verdict": (verdict.REFUSALS, [60, 120, 240, 480, 960, 1920, 3600, 3600]),
    # the worker identity's attempts (docs/controllers.md: 1 s doubling to a minute)
    "identity": (identity.BACKOFF, [1, 2, 4, 8, 16, 32, 60, 60]),
}


@pytest.mark.parametrize("site", sorted(SITES))
def test_each_site_waits_as_before(site: str) -> None:
    backoff, waits = SITES[site]
    assert [backoff.delay(n) for n in range(1, len(waits) + 1)] == waits
    assert backoff.delay(0) == 0.0


def test_the_review_calls_pause_as_kube_does() -> None:
    """500 ms x1.5, stretched by [0, 20%): four pauses between five attempts."""
    retry = webhook.DEFAULT_RETRY
    assert retry.pauses.delays(retry.attempts, rand=lambda: 0.0) == [0.5, 0.75, 1.125, 1.6875]
    most = retry.pauses.delays(retry.attempts, rand=lambda: 0.999)
    assert most == pytest.approx([0.5 * 1.1998, 0.75 * 1.1998, 1.125 * 1.1998, 1.6875 * 1.1998])
    assert webhook.NO_RETRY.pauses.delays(webhook.NO_RETRY.attempts) == []


def test_jitter_stretches_within_its_share() -> None:
    backoff = backoffs.Backoff(10.0, 40.0, jitter=0.5)
    assert backoff.delay(1, rand=lambda: 0.0) == 10.0
    assert backoff.delay(1, rand=lambda: 0.5) == 12.5
    assert backoff.delay(5, rand=lambda: 0.5) == 50.0  # the cap, then its jitter (kube's order)
    draws = [backoffs.Backoff(1.0, jitter=0.2).delay(1) for _ in range(200)]
    assert all(1.0 <= d < 1.2 for d in draws) and len(set(draws)) > 1


def test_no_overflow_however_many_failures() -> None:
    """``2.0 ** 1024`` raises OverflowError: a key failing at the 300 s cap for ~85 hours did."""
    assert backoffs.Backoff(1, 300).delay(10_000) == 300
    for backoff, _ in SITES.values():
        assert backoff.delay(1_024) == backoff.delay(10**9) == backoff.cap
    assert backoffs.Backoff(0.5, factor=1.5).delay(10**6) > 1e300  # no cap: huge, not an error
    assert backoffs.Backoff(1e-300, 1e-300 * 2.0**1000).delay(10**6) == 1e-300 * 2.0**1000
    assert backoffs.Backoff(0.0, 30.0).delay(10**6) == 0.0
    assert backoffs.Backoff(5.0, 5.0).delay(3) == 5.0
    assert backoffs.Backoff(2.0, 2.0, factor=1.0).delay(10**6) == 2.0


def test_the_cap_is_reached_exactly_at_a_power_of_the_factor() -> None:
    backoff = backoffs.Backoff(0.5, 4.0)
    assert [backoff.delay(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 4, 4]
    tenth = backoffs.Backoff(0.1, 0.1 * 2**40)
    assert tenth.delay(41) == tenth.delay(42) == tenth.cap
    assert tenth.delay(40) == 0.1 * 2**39


@pytest.mark.parametrize(("initial", "cap", "factor", "jitter"), [
    (-1.0, 10.0, 2.0, 0.0), (5.0, 1.0, 2.0, 0.0), (1.0, 10.0, 0.5, 0.0),
    (1.0, 10.0, math.inf, 0.0), (1.0, 10.0, 2.0, -0.1), (math.nan, 10.0, 2.0, 0.0),
    (1e-300, 1e300, 2.0, 0.0),
])
def test_nonsense_is_refused(initial: float, cap: float, factor: float, jitter: float) -> None:
    with pytest.raises(ValueError, match="a backoff needs"):
        backoffs.Backoff(initial, cap, factor, jitter)
