"""Assemble and run the node plugin: cache start-up, informer, CSI server, shutdown.

Start-up order matters: references are rebuilt from the live mount table and stray partial
directories removed *before* the socket serves, so a restart never forgets a mounted Pod; the
socket serves Identity and NodeGetInfo at once, while mounts answer Unavailable until the informer's
first list completes. The HTTPS port (metrics, health, running downloads) starts last and is
ready once the informer has synced.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

import grpc
from prometheus_client import registry as prometheus_registry

from hub import config as hub_config
from hub import errors as hub_errors
from nodeplugin import apiclient, artifacts, kubeconfig, metrics, serve
from nodeplugin.cache import fsutil, inventory, layout, locks, mounter, refs, usage, volumes
from nodeplugin.csi import identity, node, server
from nodeplugin.materialize import download, interface, local

log = logging.getLogger(__name__)
VERSION = "0.1.0"


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    node_name: str
    endpoint: str
    root: str
    kubelet_dir: str
    kubeconfig: str | None = None
    import_dir: str | None = None
    # Until the plugin reads its NodeModelStore, these stand in for its ``spec.hub``,
    # ``spec.download`` and ``spec.watermarks.highPercent``.
    hub: hub_config.HubConfig = dataclasses.field(default_factory=hub_config.HubConfig)
    download: download.Settings = dataclasses.field(default_factory=download.Settings)
    secure_port: int = 0
    """The HTTPS port; 0 serves none (the command line defaults to 32444)."""
    bind_address: str = "0.0.0.0"
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    downloads_token_file: str | None = None


@dataclasses.dataclass
class Plugin:
    """The running pieces (tests and benchmarks reach in through these fields)."""

    config: Config
    cache: layout.Layout
    informer: artifacts.Informer
    volume_set: volumes.Volumes
    materializer: interface.Materializer
    server: grpc.aio.Server
    client: apiclient.ArtifactClient
    informer_task: asyncio.Task[None]
    started_seconds: float
    """Time from ``start`` to serving (references rebuilt, socket bound)."""
    node_service: node.Node
    metrics: metrics.Metrics
    stock: Stock
    https_task: asyncio.Task[None] | None = None
    https_stop: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    @property
    def registry(self) -> prometheus_registry.CollectorRegistry:
        return self.metrics.registry

    async def stop(self, grace: float = 2.0) -> None:
        self.https_stop.set()
        await self.server.stop(grace)
        if self.https_task is not None:
            await asyncio.gather(self.https_task, return_exceptions=True)
        self.informer_task.cancel()
        await asyncio.gather(self.informer_task, return_exceptions=True)
        await self.materializer.close()
        await self.stock.settle()
        await self.client.aclose()


class Stock:
    """The cache inventory: measured once after start and then again (in a worker thread) for
    each digest an attempt ended at, so scrapes read it without touching the disk."""

    def __init__(self, inventory: inventory.Inventory) -> None:
        self.inventory = inventory
        self._scan: asyncio.Task[None] | None = None
        self._refreshes: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Measure what is on disk, in the background: the socket need not wait for it."""
        self._scan = asyncio.create_task(self._measure_all(), name="measure the cache")

    async def _measure_all(self) -> None:
        try:
            await asyncio.to_thread(self.inventory.scan)
        except OSError as exc:
            log.warning("cannot measure the cache (stored bytes stay incomplete): %s", exc)

    def completed(self, done: interface.Completion) -> None:
        """The materializer's completion callback."""
        task = asyncio.create_task(self._refresh(done.digest), name=f"measure {done.digest}")
        self._refreshes.add(task)
        task.add_done_callback(self._refreshes.discard)

    async def _refresh(self, digest: str) -> None:
        if self._scan is not None:
            # After the scan, so its older view never overwrites the new one.
            await asyncio.shield(self._scan)
        try:
            await asyncio.to_thread(self.inventory.refresh, digest)
        except OSError as exc:
            log.warning("cannot measure %s in the cache: %s", digest, exc)

    async def settle(self) -> None:
        """Wait for the measurements under way (tests, shutdown)."""
        if self._scan is not None:
            await self._scan
        while self._refreshes:
            await asyncio.gather(*self._refreshes, return_exceptions=True)


def clean_partials(cache: layout.Layout) -> list[str]:
    """Remove partial directories that belong to no attempt (no resumable record) and strays."""
    removed: list[str] = []
    for partial in cache.partials():
        if not partial.resumable:
            fsutil.remove_tree(partial.path)
            removed.append(partial.path.name)
    for stray in cache.stray_partials():
        fsutil.remove_tree(stray)
        removed.append(stray.name)
    return removed


async def rebuild_references(
    cache: layout.Layout, read: Callable[[], str] = refs.read_mountinfo
) -> refs.References:
    found = refs.scan(refs.parse_mountinfo(read()), str(cache.objects))
    return refs.References({target: layout.digest_of_hex(h) for target, h in found.items()})


def default_materializer(config: Config, cache: layout.Layout) -> interface.Materializer:
    """The local importer with ``--import-dir``, else the hub downloader. A hub configuration
    the downloader refuses keeps the plugin serving published content; new digests then fail
    ``InvalidRequest`` saying what is wrong."""
    if config.import_dir:
        return local.LocalImporter(cache, config.import_dir)
    try:
        return download.HubMaterializer.from_config(cache, config.hub, config.download)
    except hub_errors.HubError as err:
        log.error("the hub configuration is unusable: %s; published models are still mounted, "
                  "new ones fail until it is fixed", err.message)
        return Unconfigured(f"the node's hub configuration is unusable: {err.message}")


class Unconfigured:
    """Without a usable source of content every new digest fails at once, saying why."""

    def __init__(self, message: str) -> None:
        self.message = message

    async def ensure(self, request: interface.Request) -> interface.Progress:
        return interface.Progress(
            request.digest,
            interface.State.FAILED,
            reason=interface.Reason.INVALID_REQUEST,
            message=self.message,
        )

    def running(self) -> list[interface.Progress]:
        return []

    @property
    def downloaded_bytes(self) -> int:
        return 0

    def add_done_callback(self, callback: interface.DoneCallback) -> None:
        return None  # no attempt ever runs

    async def close(self) -> None:
        return None


async def start(
    config: Config,
    *,
    client: apiclient.ArtifactClient | None = None,
    materializer: interface.Materializer | None = None,
    mount: mounter.Mounter | None = None,
) -> Plugin:
    began = time.monotonic()
    cache = layout.Layout(config.root)
    cache.create()
    removed = await asyncio.to_thread(clean_partials, cache)
    if removed:
        log.info("removed %d partial directories that belong to no attempt", len(removed))
    references = await rebuild_references(cache)
    usage_store = usage.UsageStore(cache.state_file(usage.FILE_NAME))
    usage_store.load()
    published = await asyncio.to_thread(cache.published)
    await usage_store.reconcile(references.digests(), published)
    log.info("cache %s: %d published trees, %d live mounts", cache.root, len(published),
             len(references))
    if client is None:
        connection = (
            kubeconfig.load(config.kubeconfig) if config.kubeconfig else kubeconfig.in_cluster()
        )
        client = apiclient.HttpArtifactClient(connection)
    informer = artifacts.Informer(client)
    volume_set = volumes.Volumes(
        cache,
        mount=mount or mounter.LinuxMounter(),
        references=references,
        usage_store=usage_store,
        digest_locks=locks.DigestLocks(),
        kubelet_dir=config.kubelet_dir,
    )
    if materializer is None:
        materializer = default_materializer(config, cache)
    stock = Stock(inventory.Inventory(cache))
    node_service = node.Node(
        node_name=config.node_name,
        informer=informer,
        volume_set=volume_set,
        materializer=materializer,
    )
    measured = metrics.Metrics(metrics.sources_for(
        cache, materializer, stock.inventory, lambda: node_service.mount_results))
    materializer.add_done_callback(measured.completed)
    materializer.add_done_callback(stock.completed)
    grpc_server = await server.start(config.endpoint, identity.Identity(VERSION), node_service)
    task = asyncio.create_task(informer.run(), name="artifact informer")
    stock.start()
    elapsed = time.monotonic() - began
    log.info("serving CSI on %s as node %s (started in %.3fs)", config.endpoint, config.node_name,
             elapsed)
    running = Plugin(config, cache, informer, volume_set, materializer, grpc_server, client, task,
                     elapsed, node_service=node_service, metrics=measured, stock=stock)
    if config.secure_port:
        running.https_task = await start_https(running, measured.registry)
    return running


def readiness(running: Plugin) -> str | None:
    """None once mounts can be judged (the socket serves and the informer has listed)."""
    if not running.informer.synced:
        return "the ModelArtifact list has not been read yet"
    return None


async def start_https(
    running: Plugin, registry: prometheus_registry.CollectorRegistry
) -> asyncio.Task[None] | None:
    """Serve the HTTPS port in a task; without TLS material it logs why and serves none (the
    CSI socket already serves and keeps serving)."""
    config = running.config
    try:
        cert, key = await asyncio.to_thread(
            serve.tls_files, running.cache.state / "tls", config.tls_cert_file,
            config.tls_private_key_file, [config.node_name],
        )
    except (OSError, ValueError) as exc:
        log.error("no TLS material for the HTTPS port, not serving it: %s", exc)
        return None
    app = serve.make_app(
        metrics=registry,
        ready=lambda: readiness(running),
        running=running.materializer.running,
        token_file=config.downloads_token_file,
    )
    cfg = serve.hypercorn_config_for(config.bind_address, config.secure_port, cert, key)
    log.info("serving HTTPS on %s:%d (metrics, health, downloads)", config.bind_address,
             config.secure_port)
    return asyncio.create_task(serve.serve(app, cfg, running.https_stop), name="https port")
