"""A one-line progress bar for a terminal (a plain line per update when not a terminal)."""

from __future__ import annotations

from typing import TextIO

WIDTH = 30


def size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} GiB"


def line(done: int, total: int, label: str = "") -> str:
    share = 0.0 if total <= 0 else min(1.0, done / total)
    filled = int(share * WIDTH)
    bar = "#" * filled + "-" * (WIDTH - filled)
    return f"[{bar}] {share * 100:5.1f}%  {size(done)} / {size(total)}  {label}".rstrip()


class Bar:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.last = ""

    def update(self, done: int, total: int, label: str = "") -> None:
        text = line(done, total, label)
        if text == self.last:
            return
        self.last = text
        if self.tty:
            self.out.write("\r" + text.ljust(79))
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def finish(self) -> None:
        if self.tty and self.last:
            self.out.write("\n")
            self.out.flush()
