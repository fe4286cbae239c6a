"""Command-line flags -> ``config.Settings`` (``python -m apiserver --help`` documents each)."""

from __future__ import annotations

import argparse
import pathlib
import re
from collections.abc import Sequence

from apiserver import config, storage_flags
from certs import authority
from controllers import settings as controller_settings

DESCRIPTION = """\
The model-manager API server for worker.gpustack.ai/v1 (modelartifacts, nodemodelstores),
served over TLS (HTTP/2 and HTTP/1.1) on embedded SQLite storage (default) or on etcd, where
several replicas (and --workers N processes) serve one consistent API.

Standalone mode (--standalone) needs no cluster: it creates (first start) and reuses a local CA,
a serving certificate, a static token file with an admin and a worker token, and the kubeconfigs
DIR/kubeconfig (admin) and DIR/worker.kubeconfig under --data-dir, then prints the two commands
to try next.
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m apiserver",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--standalone",
        action="store_true",
        help="run without a cluster: generate certificates, tokens and kubeconfigs under "
        "--data-dir (reused on later starts) and authenticate with static tokens",
    )
    p.add_argument(
        "--data-dir",
        type=pathlib.Path,
        default=pathlib.Path(".local"),
        help="directory for the SQLite store (DATA_DIR/store.db, with --storage=sqlite) and, in "
        "standalone mode, the "
        "certificates, tokens.csv and kubeconfigs (default: .local)",
    )
    p.add_argument(
        "--bind",
        default=config.DEFAULT_BIND,
        help=f"address to listen on (default: {config.DEFAULT_BIND})",
    )
    p.add_argument(
        "--port",
        type=int,
        default=config.DEFAULT_PORT,
        help=f"HTTPS port (default: {config.DEFAULT_PORT})",
    )
    p.add_argument(
        "--tls-cert-file",
        type=pathlib.Path,
        help="PEM serving certificate (required without --standalone; standalone mode "
        "generates DATA_DIR/serving.crt)",
    )
    p.add_argument(
        "--tls-private-key-file",
        type=pathlib.Path,
        help="PEM private key of --tls-cert-file (required without --standalone; standalone "
        "mode generates DATA_DIR/serving.key)",
    )
    p.add_argument(
        "--tls-san",
        action="append",
        default=[],
        metavar="NAME_OR_IP",
        help="extra subject alternative name for the generated serving certificate, besides "
        f"{', '.join(authority.DEFAULT_SANS)} (repeatable; standalone mode)",
    )
    p.add_argument(
        "--token-auth-file",
        type=pathlib.Path,
        help='static bearer tokens, one per line: token,user,uid,"group1,group2" (like '
        "kube-apiserver's --token-auth-file; default in standalone mode: DATA_DIR/tokens.csv, "
        "generated with an admin and a worker token)",
    )
    p.add_argument(
        "--worker-user",
        default=config.DEFAULT_WORKER_USER,
        help="the only user allowed to write ModelArtifact status "
        f"(default: {config.DEFAULT_WORKER_USER})",
    )
    p.add_argument(
        "--seed-nodemodelstore",
        action="append",
        default=[],
        metavar="NAME",
        help="create a NodeModelStore NAME with default spec at start-up unless it exists "
        "(repeatable; for trying the API without node plugins, since clients cannot create one)",
    )
    p.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="NAME[=URL]",
        help="standalone mode: a node running the plugin, and the https URL of its HTTPS port "
        "(for the progress subresource's live bytes); its NodeModelStore is created at start "
        "like --seed-nodemodelstore (repeatable)",
    )
    p.add_argument(
        "--controllers",
        choices=config.CONTROLLER_MODES,
        default="embedded",
        help="embedded: run the resolver and the aggregation in this process (default); "
        "external: they run as python -m controllers; none: do not run them",
    )
    controller_settings.add_flags(p)
    p.add_argument(
        "--shutdown-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long open requests such as watches may take to finish "
        "(default: 5)",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default: INFO)",
    )
    storage_flags.add(p)
    return p


def parse(argv: Sequence[str] | None = None) -> config.Settings:
    p = parser()
    args = p.parse_args(argv)
    data_dir: pathlib.Path = args.data_dir.resolve()
    if not 0 < args.port < 65536:
        p.error("--port must be between 1 and 65535")
    files = authority.Files.under(data_dir)
    cert, key, tokens = args.tls_cert_file, args.tls_private_key_file, args.token_auth_file
    if args.standalone:
        if cert is not None or key is not None:
            # the kubeconfigs written in standalone mode trust the generated CA only
            p.error("--standalone generates its serving certificate; drop --tls-cert-file and "
                    "--tls-private-key-file, or run without --standalone")
        cert, key = files.cert, files.key
        tokens = tokens or data_dir / "tokens.csv"
    else:
        missing = [
            flag
            for flag, value in (
                ("--tls-cert-file", cert),
                ("--tls-private-key-file", key),
                ("--token-auth-file", tokens),
            )
            if value is None
        ]
        if missing:
            p.error(f"without --standalone these flags are required: {', '.join(missing)}")
        if args.seed_nodemodelstore:
            p.error("--seed-nodemodelstore is a standalone-mode flag")
        if args.node:
            p.error("--node is a standalone-mode flag (a cluster finds the plugins' Pods)")
    nodes = tuple(_node(p, text) for text in args.node)
    if args.leader_elect_renew_deadline >= args.leader_elect_lease_duration:
        p.error("--leader-elect-renew-deadline must be shorter than the lease duration")
    if args.secrets_dir is not None and not args.standalone:
        p.error("--secrets-dir is a standalone-mode flag (a cluster reads Secrets)")
    return config.Settings(
        data_dir=data_dir,
        tls_cert_file=cert.resolve(),
        tls_private_key_file=key.resolve(),
        token_auth_file=tokens.resolve(),
        bind=args.bind,
        port=args.port,
        standalone=args.standalone,
        worker_username=args.worker_user,
        tls_sans=tuple(args.tls_san),
        seed_nodemodelstores=tuple(args.seed_nodemodelstore),
        nodes=nodes,
        controllers=args.controllers,
        controller_settings=controller_settings.Settings(
            hub=controller_settings.hub_from(args),
            revalidate_interval=args.revalidate_interval,
            secrets_dir=args.secrets_dir.resolve() if args.secrets_dir else None,
            plugin_urls=tuple((name, url) for name, url in nodes if url),
            plugin_ca_file=args.plugin_ca_file,
            plugin_port=args.plugin_secure_port,
            plugin_selector=args.plugin_pod_selector,
            settings_configmap=args.settings_configmap,
            leader_elect=args.leader_elect,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        ),
        shutdown_timeout=args.shutdown_timeout,
        log_level=args.log_level,
        storage=storage_flags.settings(p, args),
    )


def _node(p: argparse.ArgumentParser, text: str) -> tuple[str, str]:
    """``NAME`` or ``NAME=https://host:port``."""
    name, _, url = text.partition("=")
    if not name or not _NODE_NAME.fullmatch(name):
        p.error(f"--node {text[:80]!r}: the node name must be a DNS subdomain")
    if url and not url.startswith("https://"):
        p.error(f"--node {name}: the plugin URL must start with https://")
    return name, url.rstrip("/")


_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
