"""Go-style durations (``500ms``, ``30s``, ``1m30s``, ``24h``), the spelling kube's flags and the
settings ConfigMap use; one parser for every flag and setting that takes one."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_ECHO = 40
"""At most this much of a refused value is echoed back."""


def parse(text: str, *, positive: bool = False, bare_seconds: bool = True) -> float:
    """Seconds from a duration; ``bare_seconds`` also takes a plain number of seconds.

    Raises ValueError naming the rule: not a duration, negative, or (``positive``) zero.
    """
    value = text.strip()
    seconds: float | None = None
    if bare_seconds:
        try:
            seconds = float(value)
        except ValueError:
            seconds = None
    if seconds is None:
        position, seconds = 0, 0.0
        while position < len(value):
            match = _PART.match(value, position)
            if match is None:
                break
            seconds += float(match[1]) * _UNITS[match[2]]
            position = match.end()
        if not value or position != len(value):
            raise ValueError(f"{value[:_ECHO]!r} is not a duration such as 30s, 5m or 1h30m")
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"{value[:_ECHO]!r} is not a finite duration")
    if seconds < 0:
        raise ValueError(f"{value[:_ECHO]!r}: a duration cannot be negative")
    if positive and seconds == 0:
        raise ValueError(f"{value[:_ECHO]!r} must be a positive duration")
    return seconds


def flag(*, positive: bool = False, bare_seconds: bool = True) -> Callable[[str], float]:
    """An argparse ``type=`` for a duration flag."""

    def convert(text: str) -> float:
        try:
            return parse(text, positive=positive, bare_seconds=bare_seconds)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert
