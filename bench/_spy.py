"""Summarize a py-spy raw profile (``py-spy record -f raw --threads --idle -r 250``) by activity.

``python -m bench._spy FILE [RATE]`` prints the thread-seconds spent in each activity of the
download path (receiving on the loop or in threads, hashing, writing, fsync, ledger writes,
bookkeeping), for the event-loop thread and for the other threads, and the idle time of each.
A sample belongs to the first activity whose function is on its stack; idle is the rest whose
innermost frame waits (the loop's epoll, a pool thread waiting for work).
"""

from __future__ import annotations

import collections
import sys

ACTIVITIES = (
    ("receive: blocking readinto (threads)", ("RangeBody._receive", "RangeBody.readinto")),
    ("receive: request + redirect (threads)", ("open_range",)),
    ("receive: frontier hold-back (threads)", ("_hold_back",)),
    ("receive: rate limit wait (threads)", ("run_coroutine_threadsafe",)),
    ("receive: httpx/httpcore/h11/anyio (loop)", ("httpcore", "h11", "anyio", "httpx")),
    ("hash", ("Hasher.update",)),
    ("write (pwritev, writeback start)", ("_write_and_hash",)),
    ("checkpoint fsync (+ page drop)", ("_sync_and_drop", "fsync_path")),
    ("ledger write", ("write_atomic", "Ledger.encode")),
    ("ranges/transfer/limits bookkeeping", ("ranges.py", "transfer.py", "limits.py",
                                            "receive.py")),
    ("thread hops", ("to_thread", "run_in_executor", "call_soon_threadsafe",
                     "_write_to_self", "_read_from_self")),
)
IDLE = ("EpollSelector.select", "select (selectors.py", "_worker", "Condition.wait",
        "Event.wait")


def classify(frames: list[str]) -> str:
    for label, needles in ACTIVITIES:
        if any(n in frame for frame in frames for n in needles):
            return label
    if any(n in frames[-1] for n in IDLE):
        return "idle"
    return "other"


def main(path: str, rate: float = 250.0) -> None:
    seconds: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with open(path) as f:
        for line in f:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            frames = stack.split(";")
            group = "event loop" if "MainThread" in frames[0] else "other threads"
            seconds[group][classify(frames)] += int(count_text) / rate
    for group, found in seconds.items():
        print(f"== {group}")
        for label, value in found.most_common():
            print(f"  {value:7.2f} thread-s  {label}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 250.0)
