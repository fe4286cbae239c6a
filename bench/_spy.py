"""Summarize a py-spy raw profile (``py-spy record -f raw --threads --idle``) by thread.

``python -m bench._spy FILE [N]`` prints, for the event-loop thread and for the other threads
together, the share of samples whose innermost frame is each function (self time), and the
share spent inside a few named layers (inclusive time), the N largest of each.
"""

from __future__ import annotations

import collections
import re
import sys

_FRAME = re.compile(r"^(.*) \(([^()]*)\)$")
LAYERS = {
    "select/epoll (idle)": ("select (selectors.py", "EpollSelector.select"),
    "httpcore/h11 receive": ("h11", "httpcore", "anyio"),
    "hashing": ("hashing.py",),
    "write (pwritev)": ("_write_and_hash",),
    "fsync": ("fsync",),
    "ranges/transfer bookkeeping": ("ranges.py", "transfer.py", "limits.py"),
    "thread hops (to_thread / futures)": ("to_thread", "futures/thread.py", "run_in_executor"),
}


def main(path: str, top: int = 15) -> None:
    selfs: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    layers: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    totals: collections.Counter[str] = collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = stack.split(";")
            group = "event loop" if "MainThread" in frames[0] else "other threads"
            totals[group] += count
            leaf = frames[-1]
            match = _FRAME.match(leaf)
            selfs[group][match[1] + " (" + match[2].split(":")[0] + ")" if match else leaf] += count
            for name, needles in LAYERS.items():
                if any(n in fr for fr in frames for n in needles):
                    layers[group][name] += count
    for group, total in totals.items():
        print(f"== {group}: {total} samples")
        for name, count in layers[group].most_common():
            print(f"   {100 * count / total:5.1f}%  (inclusive) {name}")
        for name, count in selfs[group].most_common(top):
            print(f"   {100 * count / total:5.1f}%  {name}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 15)
