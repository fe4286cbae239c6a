"""One duration grammar for every flag and setting (Go's spelling, plus bare seconds)."""

from __future__ import annotations

import argparse

import pytest

from timing import durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30.0), ("1m30s", 90.0), ("24h", 86400.0), ("1h30m", 5400.0),
     ("1.5s", 1.5), (" 2m ", 120.0), ("10", 10.0), ("0", 0.0), ("0s", 0.0)],
)
def test_durations_in_seconds(text: str, seconds: float) -> None:
    assert durations.parse(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "10x", "1m 30s", "-5s", "5s-", "1d", "nan", "inf",
                                  "m30", "1h30"])
def test_what_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        durations.parse(text)


def test_negative_bare_seconds_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        durations.parse("-1")


def test_positive_refuses_zero() -> None:
    with pytest.raises(ValueError, match="positive"):
        durations.parse("0s", positive=True)


def test_bare_seconds_can_be_refused() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        durations.parse("10", bare_seconds=False)


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(ValueError) as caught:
        durations.parse("x" * 10_000)
    assert len(str(caught.value)) < 120


def test_flag_speaks_argparse() -> None:
    convert = durations.flag(positive=True)
    assert convert("2m") == 120.0
    with pytest.raises(argparse.ArgumentTypeError):
        convert("soon")
