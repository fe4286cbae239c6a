"""Command line: ``python -m nodeplugin --node-name N --endpoint unix:///csi/csi.sock ...``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable

import kube
import logs
from hub import config as hub_config
from nodeplugin import plugin, scrub
from nodeplugin.cache import convert
from nodeplugin.materialize import download
from nodeplugin.peer import assembly as peer_assembly
from nodeplugin.peer import wire as peer_wire
from openapi import install, nodestore
from openapi import plugin as plugin_api
from timing import durations


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def bounded(low: int, high: int | None) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (no upper bound when ``high`` is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            upper = f"..{high}" if high is not None else " or more"
            raise argparse.ArgumentTypeError(f"{value} is outside {low}{upper}")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nodeplugin",
        description="CSI node plugin for driver model.csi.gpustack.ai: authorizes mounts against "
        "ModelArtifacts, keeps the node's verified model cache and bind-mounts it read-only.",
    )
    p.add_argument("--node-name", default=os.environ.get("NODE_NAME"),
                   help="this node's name, returned as node_id (default: $NODE_NAME)")
    p.add_argument("--endpoint", default=os.environ.get("CSI_ENDPOINT", "unix:///csi/csi.sock"),
                   help="CSI socket, unix:///path (default: $CSI_ENDPOINT or unix:///csi/csi.sock)")
    p.add_argument("--root", default="/var/lib/gpustack/models",
                   help="cache root holding objects/, partial/ and state/ "
                   "(default: /var/lib/gpustack/models)")
    p.add_argument("--kubelet-dir", default="/var/lib/kubelet",
                   help="kubelet's root directory; targets must lie under it "
                   "(default: /var/lib/kubelet)")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG") or None,
                   help="kubeconfig for the API (default: $KUBECONFIG, else the in-cluster "
                   "service account)")
    p.add_argument("--import-dir", default=None,
                   help="materialize digests by importing DIR/<hex>/manifest and the files "
                   "beside it (verified) instead of downloading")
    p.add_argument("--log-level", default="INFO", help="logging level (default: INFO)")
    add_hub_flags(p)
    add_store_flags(p)
    add_https_flags(p)
    add_peer_flags(p)
    return p


def add_hub_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "hub downloads (used without --import-dir; start-up defaults that stand in for the "
        "node's NodeModelStore spec until the plugin has applied it)"
    )
    hf, ms = nodestore.HUGGING_FACE_ENDPOINT.default, nodestore.MODEL_SCOPE_ENDPOINT.default
    g.add_argument("--huggingface-endpoint", default=_env("HF_ENDPOINT", hf),
                   help=f"Hugging Face endpoint (default: $HF_ENDPOINT or {hf})")
    g.add_argument("--modelscope-endpoint", default=_env("MODELSCOPE_ENDPOINT", ms),
                   help=f"ModelScope endpoint (default: $MODELSCOPE_ENDPOINT or {ms})")
    g.add_argument("--https-proxy", default=_env("HTTPS_PROXY", _env("https_proxy", "")),
                   help="proxy for HTTPS requests to the hubs (default: $HTTPS_PROXY; empty: "
                   "direct)")
    g.add_argument("--no-proxy", default=_env("NO_PROXY", _env("no_proxy", "")),
                   help="comma-separated hosts, .domains, IPs and CIDRs reached directly "
                   "(default: $NO_PROXY)")
    g.add_argument("--ca-bundle", metavar="FILE", default=_env("HUB_CA_BUNDLE", ""),
                   help="PEM bundle of the CAs trusted for the hubs and the proxy (default: "
                   "$HUB_CA_BUNDLE; empty: the system's)")
    # The spec's defaults and bounds (openapi.nodestore): these stand in for it until it applies.
    jobs, rate, high = nodestore.CONCURRENCY, nodestore.BYTES_PER_SECOND, nodestore.HIGH_PERCENT
    g.add_argument("--download-concurrency", type=bounded(jobs.minimum, jobs.maximum),
                   default=_env("DOWNLOAD_CONCURRENCY", str(jobs.default)),
                   help=f"open hub requests on the node, {jobs.minimum}-{jobs.maximum} "
                   f"(default: $DOWNLOAD_CONCURRENCY or {jobs.default})")
    g.add_argument("--download-bytes-per-second", type=bounded(rate.minimum, None),
                   default=_env("DOWNLOAD_BYTES_PER_SECOND", str(rate.default)),
                   help="the node's download rate; 0 is unlimited (default: "
                   f"$DOWNLOAD_BYTES_PER_SECOND or {rate.default})")
    g.add_argument("--high-watermark", type=bounded(high.minimum, high.maximum),
                   default=_env("HIGH_WATERMARK_PERCENT", str(high.default)),
                   help=f"percent of the cache filesystem downloads may fill, {high.minimum}-"
                   f"{high.maximum} (default: $HIGH_WATERMARK_PERCENT or {high.default})")


duration = durations.flag(positive=True, bare_seconds=False)
"""An argparse type: a positive Go-style duration (``168h``, ``90m``, ``1h30m``) in seconds."""


def add_store_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("node store (the NodeModelStore, collection, integrity scrub)")
    g.add_argument("--namespace", default=_env("POD_NAMESPACE", install.DEFAULT_NAMESPACE),
                   help="the operator namespace, where the spec's CA ConfigMap lives (default: "
                   f"$POD_NAMESPACE or {install.DEFAULT_NAMESPACE})")
    g.add_argument("--scrub-interval", type=duration, default="168h", metavar="DURATION",
                   help="one full integrity pass over the published trees per DURATION "
                   "(default: 168h, a week)")
    g.add_argument("--scrub-bytes-per-second", type=bounded(0, None),
                   default=str(scrub.DEFAULT_BYTES_PER_SECOND),
                   help="the scrub never reads faster than this; 0 is no limit beyond the "
                   f"interval's pace (default: {scrub.DEFAULT_BYTES_PER_SECOND})")


def add_https_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("HTTPS port (/metrics, /readyz, /livez, /model/downloads)")
    g.add_argument("--secure-port", type=bounded(0, 65535),
                   default=_env("SECURE_PORT", str(plugin_api.DEFAULT_PORT)),
                   help="HTTPS port; 0 disables it (default: $SECURE_PORT or "
                   f"{plugin_api.DEFAULT_PORT})")
    g.add_argument("--bind-address", default="0.0.0.0",
                   help="address the HTTPS port listens on (default: 0.0.0.0)")
    g.add_argument("--tls-cert-file", default=None,
                   help="serving certificate (PEM); without it and --tls-private-key-file a "
                   "self-signed pair is kept under ROOT/state/tls/")
    g.add_argument("--tls-private-key-file", default=None, help="the certificate's key (PEM)")
    g.add_argument("--downloads-token-file", default=None,
                   help="standalone: the file holding the bearer token GET /model/downloads "
                   "requires (the worker's, shared); re-read on every request")
    g.add_argument("--worker-user", default=_env("WORKER_USER", ""),
                   help="in a cluster (without --downloads-token-file): the user GET "
                   "/model/downloads admits, after a TokenReview of the caller's token "
                   "(default: $WORKER_USER; empty refuses everyone)")


def _address(text: str) -> tuple[str, str]:
    node, sep, url = text.partition("=")
    if not sep or not node or not url.startswith("https://"):
        raise argparse.ArgumentTypeError(f"{text!r} is not NODE=https://host:port")
    return node, url


def add_peer_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("node-to-node sync (off unless --peer-port is set)")
    g.add_argument("--peer-port", type=bounded(0, 65535), default=_env("PEER_PORT", "0"),
                   help="serve published trees to other plugins on this port and pull from "
                   "them before the hub; 0 turns node-to-node sync off (default: $PEER_PORT "
                   "or 0)")
    g.add_argument("--peer-user", default=_env("PEER_USER", ""),
                   help="the node plugins' ServiceAccount user, the one identity the peer port "
                   "admits after a TokenReview (default: $PEER_USER)")
    g.add_argument("--peer-token-file", default=peer_assembly.TOKEN_FILE,
                   help="this plugin's projected token for the audience "
                   f"{peer_wire.AUDIENCE} (default: {peer_assembly.TOKEN_FILE})")
    g.add_argument("--peer-advertise-address", metavar="HOST", default=_env("POD_IP", ""),
                   help="the IP address or DNS name other plugins reach this one's peer port "
                   "at, published in its NodeModelStore's status.peer.url, which is how they "
                   "find it (default: $POD_IP; empty publishes none, and the others need "
                   "--peer-address)")
    g.add_argument("--peer-address", type=_address, action="append", default=[],
                   metavar="NODE=URL", help="another node's peer port, over what that node "
                   "publishes (repeatable)")
    g.add_argument("--peer-ca-file", default=None,
                   help="verify peers' certificates against this CA (default: not verified; "
                   "their content is bound to the digest either way)")
    g.add_argument("--peer-max-streams", type=bounded(1, 256), default="8",
                   help="file answers served to peers at once; later ones wait their turn "
                   "(default: 8)")
    g.add_argument("--peer-max-streams-per-peer", type=bounded(1, 256), default=None,
                   metavar="N", help="of those, at most N for one caller (one plugin Pod), so "
                   "no caller holds them all (default: half of --peer-max-streams)")
    g.add_argument("--peer-send-timeout", type=duration, default="30s", metavar="DURATION",
                   help="an answer whose caller reads nothing for this long is cut, its file "
                   "and stream freed (default: 30s, the pulling side's own read timeout)")
    g.add_argument("--peer-follow-fetching", choices=("true", "false"), default="true",
                   help="take a file another node is fetching from a hub from that node as its "
                   "bytes arrive, instead of waiting for it to be stored (default: true)")


def config_from(args: argparse.Namespace) -> plugin.Config:
    return plugin.Config(
        node_name=args.node_name,
        endpoint=args.endpoint,
        root=args.root,
        kubelet_dir=args.kubelet_dir,
        kubeconfig=args.kubeconfig,
        import_dir=args.import_dir,
        hub=hub_config.HubConfig(
            huggingface_endpoint=args.huggingface_endpoint,
            modelscope_endpoint=args.modelscope_endpoint,
            https_proxy=args.https_proxy or None,
            no_proxy=args.no_proxy,
            ca_bundle=args.ca_bundle or None,
        ),
        download=download.Settings(
            concurrency=args.download_concurrency,
            bytes_per_second=args.download_bytes_per_second,
            high_percent=args.high_watermark,
            follow_fetching=args.peer_follow_fetching == "true",
        ),
        secure_port=args.secure_port,
        bind_address=args.bind_address,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        downloads_token_file=args.downloads_token_file,
        namespace=args.namespace,
        worker_user=args.worker_user,
        scrub_interval=args.scrub_interval,
        scrub_bytes_per_second=args.scrub_bytes_per_second,
        peer=peer_assembly.Settings(
            port=args.peer_port, plugin_user=args.peer_user, token_file=args.peer_token_file,
            addresses=dict(args.peer_address), ca_file=args.peer_ca_file,
            max_streams=args.peer_max_streams, advertise_address=args.peer_advertise_address,
            max_streams_per_peer=args.peer_max_streams_per_peer,
            send_timeout=args.peer_send_timeout,
        ),
    )


async def serve(config: plugin.Config) -> int:
    try:
        running = await plugin.start(config)
    except kube.ConfigError as err:
        logging.getLogger(__name__).error(
            "cannot reach the API: %s (pass --kubeconfig, or run in a Pod with its service "
            "account)", err)
        return 2
    except convert.NewerFormat as err:
        logging.getLogger(__name__).error("cannot use the cache: %s", err.message)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    logging.getLogger(__name__).info("stopping")
    await running.stop()
    return 0


def problem(args: argparse.Namespace) -> str | None:
    """What is wrong with parsed flags beyond what argparse checks (None: nothing)."""
    if not args.node_name:
        return "--node-name (or $NODE_NAME) is required"
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        return "--tls-cert-file and --tls-private-key-file go together"
    if args.log_level.upper() not in logging.getLevelNamesMapping():
        return f"--log-level {args.log_level[:40]!r}: not a logging level"
    if args.peer_port and args.peer_advertise_address:
        try:
            peer_assembly.url_of(args.peer_advertise_address, args.peer_port)
        except ValueError as exc:
            return f"--peer-advertise-address (or $POD_IP): {exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    wrong = problem(args)
    if wrong is not None:
        print(wrong, file=sys.stderr)
        return 2
    logs.setup(args.log_level)
    return asyncio.run(serve(config_from(args)))


if __name__ == "__main__":
    raise SystemExit(main())
