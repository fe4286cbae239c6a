"""Run every benchmark module in bench/ (or those named on the command line)."""

from __future__ import annotations

import importlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
SKIP = {"__init__", "__main__", "result"}


def available() -> list[str]:
    names = [p.stem for p in HERE.glob("*.py") if p.stem not in SKIP and not p.stem.startswith("_")]
    return sorted(n.replace("_", "-") for n in names)


def main(argv: list[str]) -> int:
    chosen = [a for a in argv if a] or available()
    for name in chosen:
        if name not in available():
            print(f"unknown benchmark {name!r}; known: {', '.join(available())}", file=sys.stderr)
            return 2
        module = importlib.import_module(f"bench.{name.replace('-', '_')}")
        module.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
