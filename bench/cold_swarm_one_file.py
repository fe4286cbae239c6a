"""cold-swarm-one-file: ``bench/cold_swarm.py`` with a model of one file (a single huge GGUF).

Four cold plugins, sync on, the file followed as it arrives (the default), against all four
from the hub and against sync on without following (``--peer-follow-fetching=false``: the
others wait until the one fetching it stored it), interleaved in one run. Value: the hub's bytes
/ the model's size; the time ratios are in ``params``. Root.
"""

from __future__ import annotations

from bench import cold_swarm


def main() -> None:
    cold_swarm.main(one_file=True)


if __name__ == "__main__":
    main()
