"""CPU accounting per thread of other processes, read from ``/proc/<pid>/task/*/stat``.

``Sampler`` polls the threads of the processes it watches and keeps each thread's last figures,
so a thread that ends before the sampler stops is still counted. Used by the profile mode of
``bench.materialize_cold`` to tell where the two cores went (the downloader's event loop, its
worker threads, the fixture hub's server threads, the kernel's share of each).
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading

TICKS = os.sysconf("SC_CLK_TCK")


def threads_of(pid: int) -> dict[int, tuple[str, float, float]]:
    """``{tid: (name, user seconds, system seconds)}`` for the threads of ``pid`` now."""
    found: dict[int, tuple[str, float, float]] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            name = text[text.index("(") + 1 : text.rindex(")")]
            fields = text[text.rindex(")") + 2 :].split()
            # fields[11], fields[12] are utime, stime (stat fields 14 and 15).
            found[int(tid)] = (name, int(fields[11]) / TICKS, int(fields[12]) / TICKS)
    return found


def process_of(pid: int) -> tuple[float, float]:
    """(user, system) seconds of the whole process, threads that ended included."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return 0.0, 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


class Sampler:
    def __init__(self, interval: float = 0.1) -> None:
        self._interval = interval
        self._pids: dict[int, str] = {}
        self._last: dict[tuple[int, int], tuple[str, float, float]] = {}
        self._first: dict[tuple[int, int], tuple[str, float, float]] = {}
        self._process_first: dict[int, tuple[float, float]] = {}
        self._process_last: dict[int, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, pid: int, label: str) -> None:
        """Count ``pid``'s threads from now on (what they used before is left out)."""
        self._pids[pid] = label
        self._process_first[pid] = process_of(pid)
        self._sample()
        for key, figures in self._last.items():
            self._first.setdefault(key, figures)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        for pid in list(self._pids):
            figures = process_of(pid)
            if figures != (0.0, 0.0):
                self._process_last[pid] = figures
            for tid, figures in threads_of(pid).items():
                self._last[(pid, tid)] = figures

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def report(self) -> dict[str, dict[str, tuple[float, float]]]:
        """Per process label: ``total`` (the process, ended threads included) and per thread
        kind (the main thread, the others summed; only threads alive at some sample), each as
        (user, system) seconds."""
        out: dict[str, dict[str, list[float]]] = collections.defaultdict(
            lambda: collections.defaultdict(lambda: [0.0, 0.0])
        )
        for (pid, tid), (name, user, system) in self._last.items():
            _, user0, system0 = self._first.get((pid, tid), (name, 0.0, 0.0))
            user, system = user - user0, system - system0
            # Python does not name its threads: the main thread (the event loop) is told apart.
            slot = out[self._pids[pid]]["main" if tid == pid else f"other {_family(name)}"]
            slot[0] += user
            slot[1] += system
        for pid, label in self._pids.items():
            (u0, s0), (u1, s1) = self._process_first[pid], self._process_last.get(pid, (0, 0))
            out[label]["total"][0] += max(0.0, u1 - u0)
            out[label]["total"][1] += max(0.0, s1 - s0)
        return {
            label: {name: (round(u, 2), round(s, 2)) for name, (u, s) in sorted(names.items())}
            for label, names in out.items()
        }


def _family(name: str) -> str:
    """Thread names without their running number (``asyncio_3`` -> ``asyncio``)."""
    head = name.rstrip("0123456789").rstrip("_-")
    return head or name
