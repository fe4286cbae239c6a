"""The controllers' configuration: one frozen value, and the flags that fill it (shared by
``python -m apiserver`` and ``python -m controllers`` so both spell them alike)."""

from __future__ import annotations

import argparse
import dataclasses
import pathlib

from hub import config as hub_config
from openapi import nodestore
from timing import durations

DEFAULT_INTERVAL = 24 * 3600.0
DEFAULT_PLUGIN_PORT = 32444
# The labels the chart gives the node plugin DaemonSet's Pods (templates/nodeplugin.yaml).
DEFAULT_PLUGIN_SELECTOR = (
    "app.kubernetes.io/name=model-manager,app.kubernetes.io/component=node-plugin")
DEFAULT_SETTINGS_CONFIGMAP = "model-manager-settings"
DEFAULT_LEASE = "model-manager-controllers"


duration = durations.flag(positive=True, bare_seconds=False)
"""A positive Go-style duration (``24h``, ``1h30m``, ``90s``) in seconds."""


def interval(text: str) -> float:
    """A revalidation interval: a duration of at least a minute (the staircase's step)."""
    seconds = duration(text)
    if seconds < 60:
        raise argparse.ArgumentTypeError(f"{text!r} is shorter than the 1m minimum")
    return seconds


DEFAULT_WARMUP_IMAGE = "gpustack/mirrored-python:3.12-alpine"
"""Needs only a shell, find and sha256sum; the reference's default setting."""
DEFAULT_WARMUP_RETRY = 300.0


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    hub: hub_config.HubConfig = dataclasses.field(default_factory=hub_config.HubConfig)
    revalidate_interval: float = DEFAULT_INTERVAL
    secrets_dir: pathlib.Path | None = None
    """Standalone: ``DIR/<namespace>/<name>/token``."""
    plugin_urls: tuple[tuple[str, str], ...] = ()
    """Standalone: (node, https URL of its plugin) from ``--node NAME=URL``."""
    plugin_ca_file: str | None = None
    plugin_port: int = DEFAULT_PLUGIN_PORT
    plugin_selector: str = DEFAULT_PLUGIN_SELECTOR
    plugin_namespace: str = ""
    settings_configmap: str = DEFAULT_SETTINGS_CONFIGMAP
    namespace: str = "gpustack-system"
    """The worker's own namespace (its Lease, its settings ConfigMap)."""
    leader_elect: bool = False
    lease_name: str = DEFAULT_LEASE
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""
    resolver_workers: int = 8
    prefetch_warmup_image: str = DEFAULT_WARMUP_IMAGE
    """The image of the prefetches' warm-up Pods (cluster mode; controllers/warmup.py)."""
    prefetch_warmup_retry: float = DEFAULT_WARMUP_RETRY
    """Seconds a failed warm-up Pod is kept, its reason reported, before it is deleted."""


def add_flags(p: argparse.ArgumentParser, *, serving: bool = True) -> None:
    """The controllers' flags; ``serving`` adds those of the progress view (the API server's:
    where the plugins answer and how to trust them)."""
    g = p.add_argument_group("controllers (docs/controllers.md)")
    g.add_argument("--prefetch-warmup-image", default=DEFAULT_WARMUP_IMAGE, metavar="IMAGE",
                   help="cluster mode: the image of the ModelPrefetch warm-up Pods, which need "
                   f"only a shell, find and sha256sum (default: {DEFAULT_WARMUP_IMAGE})")
    g.add_argument("--prefetch-warmup-retry-interval", type=duration,
                   default=DEFAULT_WARMUP_RETRY, metavar="DURATION",
                   help="cluster mode: how long a failed warm-up Pod is kept, its reason "
                   "reported, before it is deleted and a fresh one made (default: 5m)")
    g.add_argument("--leader-elect", action="store_true",
                   help="cluster mode: run the controllers only while holding the Lease "
                   f"{DEFAULT_LEASE} in --namespace, so one of several replicas resolves "
                   "(standalone mode always leads)")
    g.add_argument("--leader-elect-lease-duration", type=duration, default=15.0,
                   metavar="DURATION", help="how long a Lease holds without renewal (default: 15s)")
    g.add_argument("--leader-elect-renew-deadline", type=duration, default=10.0,
                   metavar="DURATION",
                   help="how long the leader retries renewing before it stops (default: 10s)")
    g.add_argument("--leader-elect-retry-period", type=duration, default=2.0, metavar="DURATION",
                   help="how often replicas try to take or renew the Lease (default: 2s)")
    g.add_argument("--revalidate-interval", type=interval, default=DEFAULT_INTERVAL,
                   metavar="DURATION",
                   help="how often a resolved artifact's access is checked again, at least 1m "
                   "(default: 24h; "
                   "a cluster's settings ConfigMap key model-artifact-revalidate-interval wins)")
    hf, ms = nodestore.HUGGING_FACE_ENDPOINT.default, nodestore.MODEL_SCOPE_ENDPOINT.default
    g.add_argument("--huggingface-endpoint", default=hf,
                   help=f"the Hugging Face endpoint (default: {hf})")
    g.add_argument("--modelscope-endpoint", default=ms,
                   help=f"the ModelScope endpoint (default: {ms})")
    g.add_argument("--https-proxy", default="",
                   help="proxy for HTTPS requests to the hubs, without credentials (default: none)")
    g.add_argument("--no-proxy", default="",
                   help="comma-separated hosts, .domains, IPs and CIDRs reached without the proxy")
    g.add_argument("--hub-ca-bundle", default="", metavar="FILE",
                   help="PEM bundle trusted for the hubs and the proxy (default: the system's)")
    g.add_argument("--settings-configmap", default=DEFAULT_SETTINGS_CONFIGMAP, metavar="NAME",
                   help="cluster mode: the ConfigMap in --namespace whose model-artifact-* keys "
                   "override the hub flags and the interval, watched for changes "
                   f"(default: {DEFAULT_SETTINGS_CONFIGMAP})")
    g.add_argument("--secrets-dir", type=pathlib.Path, default=None, metavar="DIR",
                   help="standalone mode: hub tokens as DIR/<namespace>/<secret>/token, read when "
                   "an artifact's secretRef names them and watched for changes")
    if not serving:
        return
    g.add_argument("--plugin-ca-file", default=None, metavar="FILE",
                   help="CA bundle to verify node plugins' serving certificates when reading "
                   "their live downloads (default: encrypted but not verified)")
    g.add_argument("--plugin-secure-port", type=int, default=DEFAULT_PLUGIN_PORT, metavar="PORT",
                   help=f"cluster mode: the plugins' HTTPS port (default: {DEFAULT_PLUGIN_PORT})")
    g.add_argument("--plugin-pod-selector", default=DEFAULT_PLUGIN_SELECTOR, metavar="SELECTOR",
                   help="cluster mode: label selector of the plugin Pods "
                   f"(default: {DEFAULT_PLUGIN_SELECTOR})")


def hub_from(args: argparse.Namespace) -> hub_config.HubConfig:
    return hub_config.HubConfig(
        huggingface_endpoint=args.huggingface_endpoint,
        modelscope_endpoint=args.modelscope_endpoint,
        https_proxy=args.https_proxy or None,
        no_proxy=args.no_proxy,
        ca_bundle=args.hub_ca_bundle or None,
    )
