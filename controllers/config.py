"""The controllers' configuration: one frozen value, the flags that fill it and ``from_args``, the
one place that builds it. ``python -m apiserver`` and ``python -m controllers`` both add these
flags, so both programs spell (and default) them alike."""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
from typing import Any

from controllers.runtime import leader
from hub import config as hub_config
from openapi import install, keys, nodestore
from openapi import plugin as plugin_api
from timing import durations

DEFAULT_INTERVAL = 24 * 3600.0
DEFAULT_PLUGIN_PORT = plugin_api.DEFAULT_PORT
DEFAULT_PLUGIN_SELECTOR = keys.PLUGIN_SELECTOR
"""The labels the chart gives the node plugin DaemonSet's Pods (templates/nodeplugin.yaml)."""
DEFAULT_SETTINGS_CONFIGMAP = install.SETTINGS_CONFIGMAP
DEFAULT_LEASE = install.LEASE
DEFAULT_NAMESPACE = install.DEFAULT_NAMESPACE
DEFAULT_RESOLVER_CONCURRENCY = 8


def default_namespace() -> str:
    """The worker's own namespace: ``$POD_NAMESPACE`` (the chart sets it), else the default."""
    return os.environ.get("POD_NAMESPACE", "") or DEFAULT_NAMESPACE


duration = durations.flag(positive=True, bare_seconds=False)
"""A positive Go-style duration (``24h``, ``1h30m``, ``90s``) in seconds."""


def interval(text: str) -> float:
    """A revalidation interval: a duration of at least a minute (the staircase's step)."""
    seconds = duration(text)
    if seconds < 60:
        raise argparse.ArgumentTypeError(f"{text!r} is shorter than the 1m minimum")
    return seconds


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def node(text: str) -> tuple[str, str]:
    """``--node``: ``NAME`` or ``NAME=https://host:port``."""
    name, _, url = text.partition("=")
    if not name or not _NODE_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: the node name must be a DNS subdomain")
    if url and not url.startswith("https://"):
        raise argparse.ArgumentTypeError(f"{name}: the plugin URL must start with https://")
    return name, url.rstrip("/")


DEFAULT_WARMUP_IMAGE = "gpustack/mirrored-python:3.12-alpine"
"""Needs only a shell, find and sha256sum; the reference's default setting."""
DEFAULT_WARMUP_RETRY = 300.0


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    hub: hub_config.HubConfig = dataclasses.field(default_factory=hub_config.HubConfig)
    revalidate_interval: float = DEFAULT_INTERVAL
    secrets_dir: pathlib.Path | None = None
    """Standalone: ``DIR/<namespace>/<name>/token``."""
    nodes: tuple[tuple[str, str], ...] = ()
    """Standalone: (node, https URL of its plugin or "") from ``--node NAME[=URL]``."""
    plugin_ca_file: str | None = None
    plugin_token_file: str = plugin_api.TOKEN_FILE
    """Cluster mode: the worker's projected token for the plugins' audience."""
    plugin_port: int = DEFAULT_PLUGIN_PORT
    plugin_selector: str = DEFAULT_PLUGIN_SELECTOR
    plugin_namespace: str = ""
    settings_configmap: str = DEFAULT_SETTINGS_CONFIGMAP
    namespace: str = DEFAULT_NAMESPACE
    """The worker's own namespace (its Lease, its settings ConfigMap)."""
    leader_elect: bool = False
    lease_name: str = DEFAULT_LEASE
    lease: leader.Timing = dataclasses.field(default_factory=leader.Timing)
    identity: str = ""
    resolver_concurrency: int = DEFAULT_RESOLVER_CONCURRENCY
    prefetch_warmup_image: str = DEFAULT_WARMUP_IMAGE
    """The image of the prefetches' warm-up Pods (cluster mode; prefetches/warmup.py)."""
    prefetch_warmup_retry: float = DEFAULT_WARMUP_RETRY
    """Seconds a failed warm-up Pod is kept, its reason reported, before it is deleted."""

    @property
    def plugin_urls(self) -> tuple[tuple[str, str], ...]:
        """The ``--node`` entries that name their plugin's URL."""
        return tuple((name, url) for name, url in self.nodes if url)


def add_flags(p: argparse.ArgumentParser) -> None:
    """The controllers' flags, the same in both programs."""
    g = p.add_argument_group("controllers (docs/controllers.md)")
    g.add_argument("--namespace", default=None,
                   help="the worker's own namespace: its Lease and its settings ConfigMap "
                   f"(default: $POD_NAMESPACE, else {DEFAULT_NAMESPACE})")
    g.add_argument("--plugin-namespace", default=None,
                   help="namespace of the node plugin's ServiceAccount and Pods "
                   "(default: --namespace)")
    g.add_argument("--prefetch-warmup-image", default=DEFAULT_WARMUP_IMAGE, metavar="IMAGE",
                   help="cluster mode: the image of the ModelPrefetch warm-up Pods, which need "
                   f"only a shell, find and sha256sum (default: {DEFAULT_WARMUP_IMAGE})")
    g.add_argument("--prefetch-warmup-retry-interval", type=duration,
                   default=DEFAULT_WARMUP_RETRY, metavar="DURATION",
                   help="cluster mode: how long a failed warm-up Pod is kept, its reason "
                   "reported, before it is deleted and a fresh one made (default: 5m)")
    timing = leader.Timing()
    g.add_argument("--leader-elect", action="store_true",
                   help="cluster mode: run the controllers only while holding the Lease "
                   f"{DEFAULT_LEASE} in --namespace, so one of several replicas resolves "
                   "(standalone mode always leads)")
    g.add_argument("--leader-elect-lease-duration", type=duration,
                   default=timing.lease_duration, metavar="DURATION",
                   help="how long a Lease holds without renewal "
                   f"(default: {timing.lease_duration:g}s)")
    g.add_argument("--leader-elect-renew-deadline", type=duration,
                   default=timing.renew_deadline, metavar="DURATION",
                   help="how long the leader retries renewing before it stops "
                   f"(default: {timing.renew_deadline:g}s)")
    g.add_argument("--leader-elect-retry-period", type=duration, default=timing.retry_period,
                   metavar="DURATION", help="how often replicas try to take or renew the Lease "
                   f"(default: {timing.retry_period:g}s)")
    g.add_argument("--revalidate-interval", type=interval, default=DEFAULT_INTERVAL,
                   metavar="DURATION",
                   help="how often a resolved artifact's access is checked again, at least 1m "
                   "(default: 24h; "
                   "a cluster's settings ConfigMap key model-artifact-revalidate-interval wins)")
    g.add_argument("--resolver-concurrency", type=positive,
                   default=DEFAULT_RESOLVER_CONCURRENCY, metavar="N",
                   help=f"artifacts resolved at once (default: {DEFAULT_RESOLVER_CONCURRENCY})")
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
    g.add_argument("--node", action="append", type=node, default=[], metavar="NAME[=URL]",
                   help="standalone mode: a node running the plugin, and the https URL of its "
                   "HTTPS port (for the progress subresource's live bytes and the prefetches' "
                   "requests); the API server keeps a NodeModelStore NAME with its spec while "
                   "the controllers run, since clients cannot create one (repeatable)")
    g.add_argument("--plugin-ca-file", default=None, metavar="FILE",
                   help="CA bundle to verify node plugins' serving certificates when reading "
                   "their live downloads and asking them to prefetch (default: encrypted but "
                   "not verified)")
    g.add_argument("--plugin-token-file", default=plugin_api.TOKEN_FILE, metavar="FILE",
                   help="cluster mode: the worker's token for the audience "
                   f"{plugin_api.AUDIENCE}, sent to the plugins instead of its API token (a "
                   "projected serviceAccountToken, re-read as kubelet rotates it; "
                   f"default: {plugin_api.TOKEN_FILE})")
    g.add_argument("--plugin-secure-port", type=int, default=DEFAULT_PLUGIN_PORT, metavar="PORT",
                   help=f"cluster mode: the plugins' HTTPS port (default: {DEFAULT_PLUGIN_PORT})")
    g.add_argument("--plugin-pod-selector", default=DEFAULT_PLUGIN_SELECTOR, metavar="SELECTOR",
                   help="cluster mode: label selector of the plugin Pods "
                   f"(default: {DEFAULT_PLUGIN_SELECTOR})")


def problem(args: argparse.Namespace) -> str:
    """Why the controllers' flags cannot work together, or "" (both programs refuse it)."""
    return timing_of(args).problem()


def timing_of(args: argparse.Namespace) -> leader.Timing:
    return leader.Timing(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                         args.leader_elect_retry_period)


def from_args(args: argparse.Namespace) -> Settings:
    """The one place ``Settings`` is built from parsed flags."""
    namespace = args.namespace or default_namespace()
    return Settings(
        hub=hub_from(args),
        revalidate_interval=args.revalidate_interval,
        secrets_dir=args.secrets_dir.resolve() if args.secrets_dir else None,
        nodes=tuple(args.node),
        plugin_ca_file=args.plugin_ca_file,
        plugin_token_file=args.plugin_token_file,
        plugin_port=args.plugin_secure_port,
        plugin_selector=args.plugin_pod_selector,
        plugin_namespace=args.plugin_namespace or namespace,
        settings_configmap=args.settings_configmap,
        namespace=namespace,
        leader_elect=args.leader_elect,
        lease=timing_of(args),
        resolver_concurrency=args.resolver_concurrency,
        prefetch_warmup_image=args.prefetch_warmup_image,
        prefetch_warmup_retry=args.prefetch_warmup_retry_interval,
    )


def hub_from(args: argparse.Namespace) -> hub_config.HubConfig:
    return hub_config.HubConfig(
        huggingface_endpoint=args.huggingface_endpoint,
        modelscope_endpoint=args.modelscope_endpoint,
        https_proxy=args.https_proxy or None,
        no_proxy=args.no_proxy,
        ca_bundle=args.hub_ca_bundle or None,
    )


class _Renamed(argparse.Action):
    """A flag's old name, kept one release: it sets the new name's value and leaves a note for
    the program to log once logging is set up (``renamed``)."""

    def __init__(self, *args: Any, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        notes = getattr(namespace, "renamed_flags", None) or []
        notes.append(f"{option_string} is now {self.new}; the old name goes in a later release")
        namespace.renamed_flags = notes


def add_renamed(p: argparse.ArgumentParser | argparse._ArgumentGroup, old: str, new: str, *,
                help: str = argparse.SUPPRESS, **kwargs: Any) -> None:
    """``old`` as an alias of the flag ``new`` (``kwargs``: its type and metavar), hidden from
    ``--help`` unless ``help`` says what it is."""
    dest = new.lstrip("-").replace("-", "_")
    p.add_argument(old, dest=dest, action=_Renamed, new=new, help=help,
                   default=argparse.SUPPRESS, **kwargs)


def renamed(args: argparse.Namespace) -> list[str]:
    """The warnings to log for the old flag names given."""
    notes: list[str] = getattr(args, "renamed_flags", None) or []
    return notes
