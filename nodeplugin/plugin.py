"""Assemble and run the node plugin: cache start-up, informer, node store, CSI server, shutdown.

Start-up order matters: a cache of a later format is refused (``cache.convert``), references are
rebuilt from the live mount table, stray partial directories removed and the stored files nothing
links any more swept *before* the socket serves, so a restart never forgets a mounted Pod; every
published tree is then checked (``cache.integrity``: its stored manifest hashes to its digest,
its files have the manifest's names and sizes) by a pass that starts as the socket serves, and a
mount of a tree the pass has not reached yet checks that tree first, so no damaged tree is
mounted and the socket does not wait for the checks. The socket serves Identity and NodeGetInfo
at once, while mounts answer Unavailable until the informer's first list completes. The node
store (its spec, status, collection and scrub; the scrub's first pass once the start checks are
done) starts with the socket. The HTTPS port (metrics, health, running downloads) starts last
and is ready once the informer has synced. Every call to the API goes through one ``kube.Client``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

import grpc
from prometheus_client import registry as prometheus_registry

import kube
from hub import config as hub_config
from hub import errors as hub_errors
from nodeplugin import apiclient, artifacts, metrics, prefetchapi, reviews, scrub, serve
from nodeplugin.cache import (
    convert,
    files,
    fsutil,
    integrity,
    inventory,
    layout,
    locks,
    mounter,
    origins,
    quarantine,
    refs,
    trees,
    usage,
    view,
    volumes,
)
from nodeplugin.csi import identity, node, server
from nodeplugin.materialize import capacity, download, interface, local, peers
from nodeplugin.materialize import failures as failure_records
from nodeplugin.nodestore import assembly, collect, gate, source, watermarks
from nodeplugin.nodestore import spec as specs
from nodeplugin.peer import assembly as peer_assembly
from nodeplugin.peer import holders as peer_holders
from openapi import install
from timing import clock as clocks

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
    # Until the plugin has applied its NodeModelStore's spec, these stand in for its
    # ``spec.hub``, ``spec.download`` and ``spec.watermarks.highPercent``.
    hub: hub_config.HubConfig = dataclasses.field(default_factory=hub_config.HubConfig)
    download: download.Settings = dataclasses.field(default_factory=download.Settings)
    namespace: str = install.DEFAULT_NAMESPACE
    """The operator namespace: where the spec's CA ConfigMap lives."""
    worker_user: str = ""
    """The one user ``GET /model/downloads`` admits after a TokenReview (in a cluster)."""
    scrub_interval: float = scrub.DEFAULT_INTERVAL
    scrub_bytes_per_second: int = scrub.DEFAULT_BYTES_PER_SECOND
    secure_port: int = 0
    """The HTTPS port; 0 serves none (the command line defaults to 32444)."""
    bind_address: str = "0.0.0.0"
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    downloads_token_file: str | None = None
    peer: peer_assembly.Settings = dataclasses.field(default_factory=peer_assembly.Settings)
    """Node-to-node sync (``--peer-port``; off by default)."""
    check_trees: bool = True
    """False skips the check of the trees found at start (at start and before a first mount);
    no flag sets it: ``bench start-trees`` and ``bench mount-warm`` run their baseline of the
    plugin before issue 34 with it."""


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
    store: assembly.NodeStore
    gate: gate.Gate
    failures: failure_records.Failures
    quarantined: quarantine.Quarantine
    ledger: capacity.Capacity
    checks: integrity.Integrity
    checks_task: asyncio.Task[None] | None = None
    """The start checks' pass (done once every tree found at start was checked)."""
    reviewer: reviews.Reviewer | None = None
    kube_clients: list[kube.Client] = dataclasses.field(default_factory=list)
    """The API clients this plugin built (closed with it)."""
    https_task: asyncio.Task[None] | None = None
    https_stop: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    peer_sync: peer_assembly.PeerSync | None = None
    peer_url: peer_assembly.Published = dataclasses.field(
        default_factory=peer_assembly.Published)
    """What ``status.peer.url`` says (the peer port's URL while it serves)."""

    @property
    def registry(self) -> prometheus_registry.CollectorRegistry:
        return self.metrics.registry

    @property
    def collector(self) -> collect.Collector:
        return self.store.collector

    async def stop(self, grace: float = 2.0) -> None:
        self.https_stop.set()
        await self.server.stop(grace)
        if self.https_task is not None:
            await asyncio.gather(self.https_task, return_exceptions=True)
        if self.peer_sync is not None:
            await self.peer_sync.stop_serving()  # while the store can still clear the URL
        self.informer_task.cancel()
        await asyncio.gather(self.informer_task, return_exceptions=True)
        if self.checks_task is not None:
            self.checks_task.cancel()
            await asyncio.gather(self.checks_task, return_exceptions=True)
        self.checks.done.set()  # what waits for the checks (the inventory's scan) stops too
        await self.store.stop()
        await self.materializer.close()
        if self.peer_sync is not None:
            await self.peer_sync.close()  # the pullers' client, once no attempt runs
        await self.stock.settle()
        await self.client.aclose()
        for client in self.kube_clients:
            await client.aclose()
        if self.volume_set.view is not None:
            self.volume_set.view.close()


class Stock:
    """The cache inventory: measured once after start and then again (in a worker thread) for
    each digest an attempt ended at, so scrapes read it without touching the disk."""

    def __init__(self, inventory: inventory.Inventory) -> None:
        self.inventory = inventory
        self._scan: asyncio.Task[None] | None = None
        self._refreshes: set[asyncio.Task[None]] = set()
        self.refreshed: list[Callable[[str], None]] = []
        """Called with each digest measured again (the status reporter listens)."""

    @property
    def scan(self) -> asyncio.Task[None] | None:
        """The first measurement (None before ``start``)."""
        return self._scan

    def start(self, after: asyncio.Event | None = None) -> None:
        """Measure what is on disk, in the background: the socket need not wait for it; after
        ``after`` is set (the start checks: both walk every tree, and a tree they quarantine
        need not be measured)."""
        self._scan = asyncio.create_task(self._measure_all(after), name="measure the cache")

    async def _measure_all(self, after: asyncio.Event | None) -> None:
        if after is not None:
            await after.wait()
        try:
            await asyncio.to_thread(self.inventory.scan)
        except OSError as exc:
            log.warning("cannot measure the cache (stored bytes stay incomplete): %s", exc)

    def completed(self, done: interface.Completion) -> None:
        """The materializer's completion callback."""
        self.refresh(done.digest)

    def refresh(self, digest: str) -> None:
        """Measure ``digest`` again, in the background (it was published or taken away)."""
        task = asyncio.create_task(self._refresh(digest), name=f"measure {digest}")
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
        for listener in self.refreshed:
            listener(digest)

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


def sweep_store(cache: layout.Layout) -> int:
    """At start: links an interrupted replacement left, and the stored files nothing links
    (their last tree or partial was deleted just before a crash); the bytes freed."""
    store = files.of(cache)
    store.clean()
    return store.sweep()


async def rebuild_references(
    cache: layout.Layout, read: Callable[[], str] = refs.read_mountinfo
) -> refs.References:
    found = refs.scan(refs.parse_mountinfo(read()), str(cache.objects))
    return refs.References({target: layout.digest_of_hex(h) for target, h in found.items()})


def default_materializer(
    config: Config,
    cache: layout.Layout,
    *,
    space: capacity.Capacity | None = None,
    failures: failure_records.Failures | None = None,
    holders: peers.Peers | None = None,
    origin_records: origins.Origins | None = None,
) -> interface.Materializer:
    """The local importer with ``--import-dir``, else the hub downloader. A hub configuration
    the downloader refuses keeps the plugin serving published content; new digests then fail
    ``InvalidRequest`` saying what is wrong (until a valid spec brings a usable one)."""
    if config.import_dir:
        return local.LocalImporter(cache, config.import_dir, failures=failures)
    try:
        return download.HubMaterializer.from_config(
            cache, config.hub, config.download, space=space, failures=failures,
            holders=holders, origin_records=origin_records,
        )
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
    kube_client: kube.Client | None = None,
    cluster_client: kube.Client | None = None,
    store_api: source.StoreApi | None = None,
    reviewer: reviews.Reviewer | None = None,
    failures: failure_records.Failures | None = None,
    clock: clocks.Clock | None = None,
    read_mountinfo: Callable[[], str] = refs.read_mountinfo,
) -> Plugin:
    """Start everything. Without ``client`` the plugin builds one ``kube.Client`` from
    ``config.kubeconfig`` (or the Pod's service account) and uses it for the artifacts, its
    NodeModelStore and the TokenReviews; ``kube_client``/``cluster_client`` and ``store_api``
    put other clients in (tests). Given only an artifact ``client``, it runs without a node
    store: the flags stay in force and no status is written."""
    began = time.monotonic()
    clock = clock or clocks.SystemClock()
    cache = layout.Layout(config.root)
    cache.create()
    converting = await asyncio.to_thread(convert.check_format, cache)
    removed = await asyncio.to_thread(clean_partials, cache)
    await asyncio.to_thread(fsutil.remove_tree, cache.root / collect.TRASH)
    if removed:
        log.info("removed %d partial directories that belong to no attempt", len(removed))
    swept = await asyncio.to_thread(sweep_store, cache)
    if swept:
        log.info("removed %d bytes of stored files nothing links any more", swept)
    try:
        references = await rebuild_references(cache, read_mountinfo)
    except OSError as exc:
        log.error("cannot read the mount table (%s); starting without references, and "
                  "collection removes nothing until it can be read", exc)
        references = refs.References()
    usage_store = usage.UsageStore(cache.state_file(usage.FILE_NAME), clock=clock.now)
    usage_store.load()
    published = await asyncio.to_thread(cache.published)
    await usage_store.reconcile(references.digests(), published)
    held = quarantine.Quarantine(cache)
    digest_locks = locks.DigestLocks()
    checks = integrity.Integrity(cache, held, digest_locks, now=clock.now,
                                 converting=converting)
    moved = await asyncio.to_thread(checks.legacy)
    if converting:
        log.info("cache %s is of format %d: its trees are converted to format %d as they are "
                 "checked", cache.root, cache.format(), layout.FORMAT)
    checks.expect([d for d in published if d not in moved]
                  if config.check_trees or converting else [])
    log.info("cache %s: %d published trees (checked once the socket serves), %d live mounts",
             cache.root, len(published) - len(moved), len(references))
    built: list[kube.Client] = []
    if client is None:
        if kube_client is None:
            kube_client = kube.Client.connect(config.kubeconfig)
            built.append(kube_client)
        client = apiclient.KubeArtifactClient(kube_client, owns_client=False)
        cluster_client = cluster_client or kube_client
        if store_api is None:
            store_api = source.KubeStoreApi(kube_client, cluster_client)
    if reviewer is None and cluster_client is not None and not config.downloads_token_file:
        reviewer = reviews.worker_calls(cluster_client, clock)
    informer = artifacts.Informer(client)
    mount = mount or mounter.LinuxMounter()
    readonly_view = view.View(cache, mount)
    readonly_view.open()
    volume_set = volumes.Volumes(
        cache,
        mount=mount,
        references=references,
        usage_store=usage_store,
        digest_locks=digest_locks,
        kubelet_dir=config.kubelet_dir,
        readonly_view=readonly_view,
        checks=checks if config.check_trees else None,
    )
    failures = failures or failure_records.Failures(cache)
    ledger = capacity.Capacity(cache.root, high_percent=_flag_high(config, cache))
    holders = None
    peer_url = peer_assembly.Published()
    if config.peer.enabled and cluster_client is not None:
        # the stores (and the addresses their plugins publish) are worker.gpustack.ai's
        holders = peer_assembly.make_holders(config.peer, kube_client or cluster_client,
                                             config.node_name)
    tree_origins = origins.Origins(cache)
    inner = materializer or default_materializer(config, cache, space=ledger, failures=failures,
                                                 holders=holders, origin_records=tree_origins)
    front = gate.Gate(inner, cache)
    stock = Stock(inventory.Inventory(cache))
    tree_facts = trees.Trees(cache)

    def make_hub(hub: hub_config.HubConfig, spec: specs.NodeSpec) -> interface.Materializer:
        settings = dataclasses.replace(config.download, concurrency=spec.concurrency,
                                       bytes_per_second=spec.bytes_per_second)
        return download.HubMaterializer.from_config(cache, hub, settings, space=ledger,
                                                    failures=failures, holders=holders,
                                                    origin_records=tree_origins)

    store = assembly.NodeStore(
        assembly.Options(config.node_name, config.namespace, config.kubelet_dir,
                         config.scrub_interval, config.scrub_bytes_per_second,
                         ca_bundle=config.hub.ca_bundle),
        cache=cache, references=references, usage_store=usage_store,
        digest_locks=digest_locks, materializer=front, failures=failures, quarantined=held,
        checks=checks, ledger=ledger, stock=stock.inventory, tree_facts=tree_facts, clock=clock,
        api=store_api, make_hub=make_hub, read_mountinfo=read_mountinfo,
        origins=tree_origins.all, peer=peer_url if store_api is not None else None,
    )  # fmt: skip
    peer_url.changed = store.changed
    front.on_started = lambda digest: store.changed()

    def quarantined_tree(digest: str) -> None:
        tree_facts.forget(digest)
        stock.inventory.drop_tree(digest)  # no longer published: at once, then measured again
        stock.refresh(digest)
        store.quarantined(digest)

    checks.changed = quarantined_tree
    # a held copy goes once its last Pod unmounts it
    volume_set.unpublished = lambda: store.collector.poke() if held.all() else None
    node_service = node.Node(
        node_name=config.node_name,
        informer=informer,
        volume_set=volume_set,
        materializer=front,
        tree_facts=tree_facts,
    )
    measured_sources = metrics.sources_for(
        cache, front, stock.inventory, lambda: node_service.mount_results,
        gc_removed_bytes=lambda: store.collector.removed_bytes,
        peer_bytes=lambda: holders.delivered_bytes if holders is not None else 0)
    measured = metrics.Metrics(metrics.state_sources(
        measured_sources, cache,
        references=lambda: (len(references), len(references.digests())),
        quarantined=lambda: (len(held.all()), held.added), failures=failures,
        high_watermark_percent=lambda: ledger.high_percent,
        store_ready=lambda: store.state.invalid is None,
        verification_failures=lambda: {
            **{("start", check.value): n for check, n in checks.failures.items()},
            **{("scrub", check.value): n for check, n in store.scrubber.failures.items()}},
    ))  # fmt: skip
    front.add_done_callback(measured.completed)
    front.add_done_callback(stock.completed)
    stock.refreshed.append(lambda digest: store.changed())
    grpc_server = await server.start(config.endpoint, identity.Identity(VERSION), node_service)
    checking = asyncio.create_task(checks.check_all(), name="start checks")
    task = asyncio.create_task(informer.run(), name="artifact informer")
    stock.start(after=checks.done)
    store.start(settled=stock.scan)
    elapsed = time.monotonic() - began
    log.info("serving CSI on %s as node %s (started in %.3fs)", config.endpoint, config.node_name,
             elapsed)
    running = Plugin(config, cache, informer, volume_set, front, grpc_server, client, task,
                     elapsed, node_service=node_service, metrics=measured, stock=stock,
                     store=store, gate=front, failures=failures, quarantined=held,
                     ledger=ledger, checks=checks, checks_task=checking, reviewer=reviewer,
                     kube_clients=built, peer_url=peer_url)
    if config.secure_port:
        running.https_task = await start_https(running, measured.registry)
    if holders is not None and cluster_client is not None:
        running.peer_sync = await start_peers(running, holders, cluster_client, clock,
                                              peer_url)
    return running


def _flag_high(config: Config, cache: layout.Layout) -> int:
    """The start-up high watermark (the flag), capped by the capacity rule with kubelet's
    defaults until a spec brings the node's own thresholds."""
    high = config.download.high_percent
    total = capacity.statvfs_usage(cache.root).total_bytes
    shared = watermarks.shares_filesystem(cache.root, config.kubelet_dir)
    return watermarks.effective(high, max(1, high - 1), None, total_bytes=total,
                                shared=shared).high_percent


async def start_peers(running: Plugin, holders: peer_holders.Holders, api: kube.Client,
                      clock: clocks.Clock, published: peer_assembly.Published | None = None,
                      ) -> peer_assembly.PeerSync | None:
    """The peer port, on the HTTPS port's certificate; without one it logs why and serves
    none (pulling from peers still works). While it serves, ``published`` carries its URL."""
    config = running.config
    files = await tls_files(running, "peer port")
    if files is None:
        return None
    cert, key = files
    return await peer_assembly.serve_port(
        config.peer, holders, cache=running.cache, api=api, bind_address=config.bind_address,
        cert=cert, key=key, withheld=lambda d: d in running.checks.pending,
        clock=clock, published=published)


async def tls_files(running: Plugin, port: str) -> tuple[str, str] | None:
    """The serving certificate and key of the HTTPS and peer ports (the flags', else the
    self-signed pair under ``state/tls``); None, logged naming ``port``, when there are none."""
    config = running.config
    try:
        return await asyncio.to_thread(
            serve.tls_files, running.cache.state / "tls", config.tls_cert_file,
            config.tls_private_key_file, [config.node_name],
        )
    except (OSError, ValueError) as exc:
        log.error("no TLS material for the %s, not serving it: %s", port, exc)
        return None


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
    files = await tls_files(running, "HTTPS port")
    if files is None:
        return None
    cert, key = files
    app = serve.make_app(
        metrics=registry,
        ready=lambda: readiness(running),
        running=running.materializer.running,
        token_file=config.downloads_token_file,
        reviewer=running.reviewer,
        worker_user=config.worker_user,
        prefetch=prefetchapi.handler(
            informer=running.informer, kubelet_dir=running.volume_set.targets.base,
            materializer=running.materializer,
            checks=running.checks if running.config.check_trees else None),
    )
    cfg = serve.hypercorn_config_for(config.bind_address, config.secure_port, cert, key)
    log.info("serving HTTPS on %s:%d (metrics, health, downloads)", config.bind_address,
             config.secure_port)
    return asyncio.create_task(serve.serve(app, cfg, running.https_stop), name="https port")
