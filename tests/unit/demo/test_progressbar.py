"""The demo's progress bar: sizes, the bar's fill, and terminal vs log output."""

from __future__ import annotations

import io

from demo import progressbar


def test_sizes() -> None:
    assert progressbar.size(512) == "512 B"
    assert progressbar.size(1536) == "1.5 KiB"
    assert progressbar.size(48 << 20) == "48.0 MiB"
    assert progressbar.size(3 << 30) == "3.0 GiB"


def test_line_fills_in_proportion_and_caps_at_full() -> None:
    assert progressbar.line(0, 100) == "[" + "-" * 30 + "]   0.0%  0 B / 100 B"
    half = progressbar.line(50 << 20, 100 << 20, "downloading")
    assert half.startswith("[" + "#" * 15 + "-" * 15 + "]  50.0%")
    assert half.endswith("50.0 MiB / 100.0 MiB  downloading")
    assert progressbar.line(200, 100).startswith("[" + "#" * 30 + "] 100.0%")
    assert "0.0%" in progressbar.line(5, 0)  # unknown total


def test_a_log_gets_one_line_per_change() -> None:
    out = io.StringIO()
    bar = progressbar.Bar(out)
    bar.update(1, 10)
    bar.update(1, 10)  # unchanged: not repeated
    bar.update(10, 10, "mounted")
    bar.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].endswith("mounted")
