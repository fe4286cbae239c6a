"""``python -m conformance``: see ``conformance.cli``."""

from conformance import cli

if __name__ == "__main__":
    raise SystemExit(cli.main())
