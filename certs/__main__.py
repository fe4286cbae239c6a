"""``python -m certs``: see ``certs.cli``."""

from certs import cli

if __name__ == "__main__":
    raise SystemExit(cli.main())
