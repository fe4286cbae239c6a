"""The one backoff: how long to wait after the n-th consecutive failure.

``initial`` after the first failure, ``factor`` (2 unless said) times longer after each further
one, never longer than ``cap``; ``jitter`` J then stretches a wait by a random share in [0, J)
of itself, as kube's ``wait.Jitter`` does (only the review calls to kube-apiserver jitter). The
exponent stops growing once the cap is reached, so a key failing for days waits the cap, never
raises ``OverflowError``; without a cap a wait stops growing at ``initial`` times 2 ** 1000, and
a cap further than that above ``initial`` is refused.

Pure: who counts the failures, what starts the count over, and whether it survives a restart
(the node plugin's failure records keep theirs in ``state/``) are the caller's business; each
site names its numbers once, as a ``Backoff`` beside the code that counts. A second doubling
formula anywhere in the product fails ``tests/unit/timing/test_backoff_owner.py``.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable

Rand = Callable[[], float]
"""A uniform draw in [0, 1) (``random.random``; tests inject their own)."""
_GROWTH = 1000.0
"""A wait grows to at most ``initial`` times 2 ** this (a float holds 2 ** 1023)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """Seconds to wait: ``initial`` doubling (``factor``) per consecutive failure to ``cap``,
    stretched by up to ``jitter`` of itself."""

    initial: float
    cap: float = math.inf
    factor: float = 2.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.initial <= self.cap:
            raise ValueError(f"a backoff needs 0 <= initial <= cap, not {self.initial!r} and "
                             f"{self.cap!r}")
        if self.initial > 0.0 and self.cap < math.inf and self.cap / self.initial > 2**_GROWTH:
            raise ValueError(f"a backoff needs a cap at most 2**{_GROWTH:g} times its initial, "
                             f"not {self.cap!r} and {self.initial!r}")
        if not 1.0 <= self.factor < math.inf or not 0.0 <= self.jitter < math.inf:
            raise ValueError(f"a backoff needs a finite factor >= 1 and jitter >= 0, not "
                             f"{self.factor!r} and {self.jitter!r}")

    def delay(self, failures: int, *, rand: Rand = random.random) -> float:
        """The wait after ``failures`` consecutive failures; 0 for none."""
        if failures <= 0:
            return 0.0
        wait = min(self.cap, self.initial * self.factor ** min(failures - 1, self._last_step()))
        return wait * (1.0 + self.jitter * rand()) if self.jitter else wait

    def delays(self, attempts: int, *, rand: Rand = random.random) -> list[float]:
        """The waits between ``attempts`` tries: after the first failure, the second, ... (one
        fewer than the attempts)."""
        return [self.delay(failures, rand=rand) for failures in range(1, attempts)]

    def _last_step(self) -> int:
        """The largest exponent that still changes a wait: the first that reaches the cap (one
        more, against rounding), and never one whose power would overflow."""
        if self.factor == 1.0 or self.initial == 0.0:
            return 0
        largest = int(_GROWTH / math.log2(self.factor))
        if math.isinf(self.cap):
            return largest
        return min(largest, max(0, math.ceil(math.log(self.cap / self.initial, self.factor)) + 1))
