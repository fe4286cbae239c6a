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
