"""Command-line flags -> ``config.Settings`` (``python -m apiserver --help`` documents each).

Cluster-mode flags use kube's spelling and meaning (k8s.io/apiserver's delegated authentication
and authorization options): list flags take comma-separated values and may be repeated, and
durations are Go durations (``10s``, ``1m30s``) or seconds.
"""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Sequence

from apiserver.flags import config, storage
from certs import authority
from controllers import config as controller_settings
from timing import durations

DESCRIPTION = """\
The model-manager API server for worker.gpustack.ai/v1 (modelartifacts, nodemodelstores,
modelprefetches), served over TLS (HTTP/2 and HTTP/1.1) on embedded SQLite storage (default;
--processes N server processes share its file) or on etcd, where several replicas (and their
--processes) serve one consistent API.

Cluster mode (the default) serves behind kube-apiserver as an aggregated API server: requests
are authenticated from the front proxy's headers (over its verified client certificate), client
certificates and TokenReview, and authorized by SubjectAccessReview, with the trust settings read
and watched from kube-system/extension-apiserver-authentication. The serving certificate is
reloaded when its files change.

Standalone mode (--standalone) needs no cluster: it creates (first start) and reuses a local CA,
a serving certificate, a static token file (admin, worker and node-plugin identities), a local
RBAC policy file and the kubeconfigs DIR/kubeconfig (admin), DIR/worker.kubeconfig and
DIR/plugin.kubeconfig under --data-dir, then prints the two commands to try next.
"""

_STANDALONE_ONLY = ("tls_san", "plugin_node",
                    "authorization_policy_file")
_CLUSTER_ONLY = ("kubeconfig", "authentication_kubeconfig", "authorization_kubeconfig",
                 "client_ca_file", "requestheader_client_ca_file", "requestheader_allowed_names",
                 "requestheader_username_headers", "requestheader_group_headers",
                 "requestheader_extra_headers_prefix", "requestheader_uid_headers",
                 "api_audiences")


_FILE_FLAGS = (
    ("--kubeconfig",
     "kubeconfig of the server's own client (the worker identity): Pods, /version, "
     "SelfSubjectReview, and the default for the two flags below (default: in-cluster)"),
    ("--authentication-kubeconfig",
     "kubeconfig allowed to create tokenreviews and read "
     "kube-system/extension-apiserver-authentication (default: --kubeconfig)"),
    ("--authorization-kubeconfig",
     "kubeconfig allowed to create subjectaccessreviews (default: --kubeconfig)"),
    ("--client-ca-file",
     "CA bundle for client certificates (user = CN, groups = O), reloaded on change; "
     "default: client-ca-file of extension-apiserver-authentication, watched"),
    ("--requestheader-client-ca-file",
     "CA bundle of the front proxy's client certificate, reloaded on change; with it the "
     "front-proxy configuration comes from the flags below, not from "
     "extension-apiserver-authentication (without it, each flag below that is given "
     "replaces the ConfigMap's value)"),
)
"""The cluster-mode flags that name a file: (flag, help)."""
_LIST_FLAGS = (
    ("--requestheader-allowed-names", "NAMES",
     "common names the front proxy's certificate may have (comma-separated; empty: any)"),
    ("--requestheader-username-headers", "HEADERS",
     "headers holding the user name (default: X-Remote-User)"),
    ("--requestheader-uid-headers", "HEADERS",
     "headers holding the user's UID (default: X-Remote-Uid)"),
    ("--requestheader-group-headers", "HEADERS",
     "headers holding the groups, one per line (default: X-Remote-Group)"),
    ("--requestheader-extra-headers-prefix", "PREFIXES",
     "header prefixes of the user's extra (default: X-Remote-Extra-)"),
    ("--authorization-always-allow-paths", "PATHS",
     "paths allowed without authorization, a trailing * for a prefix (default: "
     f"{','.join(config.DEFAULT_ALWAYS_ALLOW_PATHS)})"),
    ("--api-audiences", "AUDIENCES",
     "audiences sent in TokenReviews; a token must be meant for one of them (default: none "
     "sent, kube-apiserver's own)"),
)
"""The cluster-mode flags that take lists, as kube's do: comma-separated, and repeatable
(``action="extend"``): (flag, metavar, help)."""

duration = durations.flag()
"""Seconds from a Go duration (``10s``, ``1m30s``, ``500ms``) or a plain number."""


def names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m apiserver",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--standalone",
        action="store_true",
        help="run without a cluster: generate certificates, tokens, a local policy and "
        "kubeconfigs under --data-dir (reused on later starts), authenticate with static tokens "
        "and authorize with the local policy",
    )
    p.add_argument(
        "--data-dir",
        type=pathlib.Path,
        default=pathlib.Path(".local"),
        help="directory for the SQLite store (DATA_DIR/store.db, with --storage=sqlite) and, in "
        "standalone mode, the "
        "certificates, tokens.csv, policy.yaml and kubeconfigs (default: .local)",
    )
    p.add_argument("--bind", default=config.DEFAULT_BIND,
                   help=f"address to listen on (default: {config.DEFAULT_BIND})")
    p.add_argument("--port", type=int, default=config.DEFAULT_PORT,
                   help=f"HTTPS port (default: {config.DEFAULT_PORT})")
    p.add_argument(
        "--tls-cert-file",
        type=pathlib.Path,
        help="PEM serving certificate, reloaded when the file changes (required without "
        "--standalone; standalone mode generates DATA_DIR/serving.crt)",
    )
    p.add_argument(
        "--tls-private-key-file",
        type=pathlib.Path,
        help="PEM private key of --tls-cert-file, reloaded with it (required without "
        "--standalone; standalone mode generates DATA_DIR/serving.key)",
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
        help='static bearer tokens, one per line: token,user,uid,"group1,group2"[,extra] (like '
        "kube-apiserver's --token-auth-file; the optional fifth column holds the user's extra as "
        "key=value pairs joined by '&', percent-encoded). Standalone default: DATA_DIR/tokens.csv, "
        "generated with the admin, worker and node-plugin identities; in a cluster optional, "
        "tried before TokenReview",
    )
    p.add_argument(
        "--worker-user",
        help="the worker identity, the only user allowed to write ModelArtifact status. "
        f"Standalone mode: its token's user (default: {config.DEFAULT_WORKER_USER}). In a "
        "cluster the identity is learned from kube-apiserver (SelfSubjectReview, else a "
        "TokenReview of the server's own token); when this flag is given the learned name must "
        "equal it, else the identity counts as unknown",
    )
    p.add_argument(
        "--plugin-node",
        metavar="NODE",
        help="standalone mode: the node the local node-plugin identity (DATA_DIR/plugin."
        "kubeconfig) is bound to, through its authentication.kubernetes.io/node-name extra; it "
        "may write only that NodeModelStore's status (default: the first --node, else local)",
    )
    p.add_argument(
        "--authorization-policy-file",
        type=pathlib.Path,
        metavar="FILE",
        help="standalone mode: RBAC documents (Role, ClusterRole, RoleBinding, "
        "ClusterRoleBinding) added to the built-in roles (default: DATA_DIR/policy.yaml, created "
        "with a commented example)",
    )
    p.add_argument(
        "--controllers",
        choices=config.CONTROLLER_MODES,
        default="embedded",
        help="embedded: run every controller in this process (default); external: only those "
        "that need this server's in-process client here (the node stores, the prefetches' pins), "
        "the rest as python -m controllers; none: no controller (docs/controllers.md, Modes)",
    )
    controller_settings.add_flags(p)
    cluster = p.add_argument_group("cluster mode (kube's delegated authentication and "
                                   "authorization)")
    for flag, text in _FILE_FLAGS:
        cluster.add_argument(flag, type=pathlib.Path, help=text)
    for flag, metavar, text in _LIST_FLAGS:
        cluster.add_argument(flag, action="extend", type=names, metavar=metavar, help=text)
    cluster.add_argument(
        "--authentication-token-webhook-cache-ttl", type=duration, metavar="DURATION",
        default=config.DEFAULT_WEBHOOK_CACHE_TTL,
        help="how long TokenReview answers are cached (default: 10s)")
    cluster.add_argument(
        "--authorization-webhook-cache-authorized-ttl", type=duration, metavar="DURATION",
        default=config.DEFAULT_WEBHOOK_CACHE_TTL,
        help="how long allowed SubjectAccessReview answers are cached (default: 10s)")
    cluster.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl", type=duration, metavar="DURATION",
        default=config.DEFAULT_WEBHOOK_CACHE_TTL,
        help="how long refused SubjectAccessReview answers are cached (default: 10s)")
    p.add_argument(
        "--plugin-service-account", default=config.DEFAULT_PLUGIN_SERVICE_ACCOUNT,
        help="the node plugin's ServiceAccount, the only one allowed to write NodeModelStore "
        f"status (default: {config.DEFAULT_PLUGIN_SERVICE_ACCOUNT})")
    p.add_argument(
        "--shutdown-timeout", type=float, default=5.0, metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long open requests such as watches may take to finish "
        "(default: 5)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="logging level (default: INFO)")
    storage.add(p)
    return p


def _given(args: argparse.Namespace, p: argparse.ArgumentParser, dest: str) -> bool:
    return bool(getattr(args, dest)) and getattr(args, dest) != p.get_default(dest)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def parse(argv: Sequence[str] | None = None) -> config.Settings:
    p = parser()
    args = p.parse_args(argv)
    data_dir: pathlib.Path = args.data_dir.resolve()
    if not 0 < args.port < 65536:
        p.error("--port must be between 1 and 65535")
    files = authority.Files.under(data_dir)
    cert, key, tokens = args.tls_cert_file, args.tls_private_key_file, args.token_auth_file
    if args.node and not args.standalone:
        p.error("--node is a standalone-mode flag (a cluster finds the plugins' Pods)")
    if controller_settings.problem(args):
        p.error(f"--leader-elect-renew-deadline: {controller_settings.problem(args)}")
    if args.secrets_dir is not None and not args.standalone:
        p.error("--secrets-dir is a standalone-mode flag (a cluster reads Secrets)")
    cs = controller_settings.from_args(args)
    nodes = cs.nodes
    common = {
        "bind": args.bind, "port": args.port, "namespace": cs.namespace,
        "plugin_namespace": cs.plugin_namespace,
        "nodes": nodes,
        "controllers": args.controllers,
        "controller_settings": cs,
        "plugin_service_account": args.plugin_service_account,
        "shutdown_timeout": args.shutdown_timeout, "log_level": args.log_level,
        "renamed_flags": tuple(controller_settings.renamed(args)),
    }  # fmt: skip
    if args.standalone:
        if cert is not None or key is not None:
            # the kubeconfigs written in standalone mode trust the generated CA only
            p.error("--standalone generates its serving certificate; drop --tls-cert-file and "
                    "--tls-private-key-file, or run without --standalone")
        wrong = [_flag(d) for d in _CLUSTER_ONLY if _given(args, p, d)]
        if wrong:
            p.error(f"{', '.join(wrong)}: cluster-mode flags; standalone mode needs no cluster")
        policy = args.authorization_policy_file or data_dir / "policy.yaml"
        return config.Settings(
            data_dir=data_dir,
            tls_cert_file=files.cert,
            tls_private_key_file=files.key,
            token_auth_file=(tokens or data_dir / "tokens.csv").resolve(),
            standalone=True,
            worker_username=args.worker_user or config.DEFAULT_WORKER_USER,
            plugin_node=args.plugin_node or (nodes[0][0] if nodes else "local"),
            policy_file=policy.resolve(),
            tls_sans=tuple(args.tls_san),
            storage=storage.settings(p, args),
            **common,
        )
    missing = [flag for flag, value in (("--tls-cert-file", cert),
                                        ("--tls-private-key-file", key)) if value is None]
    if missing:
        p.error(f"without --standalone these flags are required: {', '.join(missing)}")
    wrong = [_flag(d) for d in _STANDALONE_ONLY if _given(args, p, d)]
    if wrong:
        p.error(f"{', '.join(wrong)}: standalone-mode flags (in a cluster RBAC decides and the "
                "nodes run their own plugins)")
    request_header = config.RequestHeaderFlags(
        client_ca_file=_resolved(args.requestheader_client_ca_file),
        allowed_names=_given_list(args.requestheader_allowed_names),
        username_headers=_given_list(args.requestheader_username_headers),
        uid_headers=_given_list(args.requestheader_uid_headers),
        group_headers=_given_list(args.requestheader_group_headers),
        extra_headers_prefix=_given_list(args.requestheader_extra_headers_prefix),
    )
    delegation = config.Delegation(
        kubeconfig=_resolved(args.kubeconfig),
        authentication_kubeconfig=_resolved(args.authentication_kubeconfig),
        authorization_kubeconfig=_resolved(args.authorization_kubeconfig),
        client_ca_file=_resolved(args.client_ca_file),
        request_header=request_header,
        always_allow_paths=tuple(args.authorization_always_allow_paths
                                 or config.DEFAULT_ALWAYS_ALLOW_PATHS),
        api_audiences=tuple(args.api_audiences or ()),
        token_cache_ttl=args.authentication_token_webhook_cache_ttl,
        authorized_cache_ttl=args.authorization_webhook_cache_authorized_ttl,
        unauthorized_cache_ttl=args.authorization_webhook_cache_unauthorized_ttl,
    )
    return config.Settings(
        data_dir=data_dir,
        tls_cert_file=cert.resolve(),
        tls_private_key_file=key.resolve(),
        token_auth_file=_resolved(tokens),
        worker_username=args.worker_user or "",
        delegation=delegation,
        storage=storage.settings(p, args),
        **common,
    )


def _given_list(values: list[str] | None) -> tuple[str, ...] | None:
    return tuple(values) if values is not None else None


def _resolved(path: pathlib.Path | None) -> pathlib.Path | None:
    return path.resolve() if path is not None else None

