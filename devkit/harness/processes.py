"""Process control for fault tests: SIGSTOP that returns only once the process really stopped."""

from __future__ import annotations

import os
import pathlib
import signal
import time

STOP_TIMEOUT = 15.0


def stopped(pid: int) -> bool:
    """True when every thread of ``pid`` is stopped (state T in /proc)."""
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue  # a thread that just ended
        if stat.rsplit(")", 1)[1].split()[0] not in ("T", "t"):
            return False
    return True


def pause(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until it is stopped (the signal is delivered asynchronously)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + STOP_TIMEOUT
    while not stopped(pid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} did not stop on SIGSTOP")
        time.sleep(0.005)


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (a ``--processes N`` server's processes)."""
    text = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def replaced(parent: int, dead: int, *, count: int, timeout: float) -> list[int]:
    """Wait until ``parent`` runs ``count`` children again, ``dead`` not among them (a
    ``--processes`` server restarting a killed process); returns them."""
    deadline = time.monotonic() + timeout
    while True:
        now = children(parent)
        if len(now) == count and dead not in now:
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"{parent} runs {now}, not {count} children without {dead}")
        time.sleep(0.1)
