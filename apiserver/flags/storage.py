"""The storage flags (``--storage``, ``--etcd-*``, ``--processes``) and the checks on their
combinations; ``cli`` adds them to its parser and stores the result in ``Settings.storage``."""

from __future__ import annotations

import argparse
import dataclasses
import pathlib

from apiserver.flags import config
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import keys
from controllers import config as controller_settings
from timing import durations

duration = durations.flag()
"""Seconds from ``30``, ``2s``, ``1m30s``, ``500ms`` (Go's spelling, as kube's flags take it)."""


def add(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("storage")
    group.add_argument(
        "--storage", choices=["sqlite", "etcd"], default="sqlite",
        help="where objects live: sqlite (default; one file under --data-dir, shared by the "
        "--processes of one server) or etcd (--etcd-servers; several replicas)",
    )
    group.add_argument(
        "--etcd-servers", metavar="URL[,URL]", default="",
        help="etcd client URLs (http:// or https://), comma-separated; with --storage=etcd",
    )
    group.add_argument("--etcd-cafile", type=pathlib.Path,
                       help="PEM CA bundle that signed the etcd servers' certificates")
    group.add_argument("--etcd-certfile", type=pathlib.Path,
                       help="PEM client certificate for etcd (with --etcd-keyfile)")
    group.add_argument("--etcd-keyfile", type=pathlib.Path,
                       help="PEM private key of --etcd-certfile")
    group.add_argument(
        "--etcd-prefix", default=None, metavar="PREFIX",
        help=f"the key prefix of every object in etcd (default: {etcd_client.DEFAULT_PREFIX}); "
        "replicas of one API share it, two APIs on one etcd need different ones",
    )
    group.add_argument(
        "--etcd-compaction-interval", type=duration, default=None, metavar="DURATION",
        help="how often etcd's history is compacted, keeping about one interval of it for "
        "watch resumes and paged lists; 0 disables (default: 5m; one replica does it per round)",
    )
    group.add_argument(
        "--etcd-request-timeout", type=duration, default=None, metavar="DURATION",
        help="deadline of each etcd call; a request that hits it answers 504 (default: 10s)",
    )
    group.add_argument(
        "--etcd-healthcheck-timeout", type=duration, default=None, metavar="DURATION",
        help="deadline of the etcd check in /readyz (default: 2s)",
    )
    group.add_argument(
        "--processes", type=int, default=1, metavar="N",
        help="server processes sharing one listening socket, to use N cores (default: 1); "
        "on SQLite they share the one file, each serving reads from its own memory, and one "
        "of them runs the controllers (a Lease in the store)",
    )
    controller_settings.add_renamed(group, "--workers", "--processes", type=int, metavar="N",
                                    help="deprecated: the old name of --processes")


def settings(p: argparse.ArgumentParser, args: argparse.Namespace) -> config.StorageSettings:
    """The checked storage settings; ``p.error`` (exit 2 with usage) for a bad combination."""
    etcd_only = {
        "--etcd-servers": args.etcd_servers or None, "--etcd-cafile": args.etcd_cafile,
        "--etcd-certfile": args.etcd_certfile, "--etcd-keyfile": args.etcd_keyfile,
        "--etcd-prefix": args.etcd_prefix,
        "--etcd-compaction-interval": args.etcd_compaction_interval,
        "--etcd-request-timeout": args.etcd_request_timeout,
        "--etcd-healthcheck-timeout": args.etcd_healthcheck_timeout,
    }  # fmt: skip
    if args.processes < 1:
        p.error("--processes must be at least 1")
    if args.storage == "sqlite":
        given = [flag for flag, value in etcd_only.items() if value is not None]
        if given:
            p.error(f"{', '.join(given)} only apply with --storage=etcd")
        return config.StorageSettings(processes=args.processes)
    servers = tuple(url.strip() for url in args.etcd_servers.split(",") if url.strip())
    if not servers:
        p.error("--storage=etcd needs --etcd-servers URL[,URL]")
    tls = set()
    for url in servers:
        try:
            tls.add(etcd_client.parse_endpoint(url)[1])
        except ValueError as exc:
            p.error(f"--etcd-servers: {exc}")
    if len(tls) > 1:
        p.error("--etcd-servers: use https:// for every endpoint or for none")
    files = {"--etcd-cafile": args.etcd_cafile, "--etcd-certfile": args.etcd_certfile,
             "--etcd-keyfile": args.etcd_keyfile}  # fmt: skip
    if (args.etcd_certfile is None) != (args.etcd_keyfile is None):
        p.error("--etcd-certfile and --etcd-keyfile go together")
    if any(files.values()) and tls != {True}:
        p.error("--etcd-cafile/--etcd-certfile/--etcd-keyfile need https:// etcd endpoints")
    for flag, path in files.items():
        if path is not None and not path.is_file():
            p.error(f"{flag}: {str(path)[:200]} is not a readable file")
    prefix = args.etcd_prefix or etcd_client.DEFAULT_PREFIX
    try:
        keys.Keys(prefix)
    except ValueError as exc:
        p.error(f"--etcd-prefix: {exc}")
    deadlines = {"request_timeout": args.etcd_request_timeout,
                 "health_timeout": args.etcd_healthcheck_timeout}  # the client's defaults
    client = etcd_client.Config(
        endpoints=servers,
        ca_file=_resolved(args.etcd_cafile),
        cert_file=_resolved(args.etcd_certfile),
        key_file=_resolved(args.etcd_keyfile),
        prefix=prefix,
        **{name: value for name, value in deadlines.items() if value is not None},
    )
    chosen = config.StorageSettings(etcd=client, processes=args.processes)
    if args.etcd_compaction_interval is None:
        return chosen
    return dataclasses.replace(chosen, etcd_compaction_interval=args.etcd_compaction_interval)


def _resolved(path: pathlib.Path | None) -> pathlib.Path | None:
    return path.resolve() if path is not None else None
