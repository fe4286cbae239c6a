"""What the API server runs besides serving: the progress view's NodeModelStore index (always)
and, with ``--controllers=embedded``, the controllers, over an in-process client as the worker.

Returns start and stop hooks for the app's lifespan (after storage starts, before it closes).
Given a client to kube-apiserver (``cluster``), the sources are the cluster's: Secrets, claims,
the settings ConfigMap and the Lease (``controllers.cluster``), the plugin Pods for live
progress, the worker's projected ServiceAccount token to authenticate to the plugins, and the
CSINodes and kubelet configz the node stores follow. Without one (standalone), ``--secrets-dir``,
every claim present, ``--node NAME=URL`` and the worker's static token.

The node stores controller (one NodeModelStore per node running the plugin) runs in this
process whenever controllers run at all, with ``--controllers=external`` too: only the worker
inside the API server can create NodeModelStores and write their spec.

In a cluster the controllers (and, with ``external``, the node stores and prefetches) start once
the worker identity is learned (``controllers.runtime.identity.Learning``): at once when the first
attempt succeeds, else when a later one does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib
from collections.abc import Awaitable, Callable

import kube
from apiserver.auth import static
from apiserver.auth import worker as workers
from apiserver.options import config
from apiserver.registry import build
from apiserver.wiring import inprocess, leases, proofs
from controllers import assembly as runner
from controllers.nodestores import controller as nodestores
from controllers.nodestores import settings as storesettings
from controllers.prefetches import controller as prefetches
from controllers.prefetches import placement, plugindelivery, warmup
from controllers.runtime import client as clients
from controllers.runtime import identity as identities
from controllers.runtime import informer, leader
from controllers.sources import claims, cluster, kubeapi, plugins, secrets
from openapi import sources
from timing import clock as clocks

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]


@dataclasses.dataclass
class Hooks:
    start: list[Hook] = dataclasses.field(default_factory=list)
    stop: list[Hook] = dataclasses.field(default_factory=list)
    node_view: runner.NodeView | None = None
    controllers: runner.Worker | None = None
    """The resolver and the aggregation (``--controllers=embedded``)."""
    node_stores: nodestores.NodeStores | None = None
    prefetches: prefetches.Prefetches | None = None
    artifacts: informer.Informer | None = None
    """The artifact informer every replica runs (admission reads it; the Worker shares it)."""


class InformerArtifacts:
    """``admission.facts.Artifacts`` over the artifact informer: unknown until it synced."""

    def __init__(self, artifacts: informer.Informer) -> None:
        self._artifacts = artifacts

    def source_of(self, namespace: str, name: str) -> str | None:
        if not self._artifacts.synced.is_set():
            return None
        found = self._artifacts.get(namespace, name)
        source = ((found or {}).get("spec") or {}).get("source") or {}
        return next((kind for kind in sources.KINDS if kind in source), None)


def prefetch_controller(
    settings: config.Settings,
    api: inprocess.RegistryClient,
    view: runner.NodeView,
    artifacts: informer.Informer,
    theirs: kubeapi.KubeApi | None,
    clock: clocks.Clock,
    *,
    standalone: prefetches.Delivery | None = None,
    plugin_pods: informer.Informer | None = None,
) -> tuple[prefetches.Prefetches, list[informer.Informer]]:
    """The prefetch controller and the informers it needs run beside it: its prefetches and, in
    a cluster, the Nodes (labels, taints), the warm-up Pods (delivery) and the DaemonSets of the
    plugin's namespace (the warm-up Pods' tolerations, with ``plugin_pods``, the progress
    view's informer, run by the view); ``standalone`` delivers without a cluster (the request
    to each ``--node`` plugin)."""
    found = informer.Informer(api, clients.MODEL_PREFETCHES, clock)
    if theirs is None or plugin_pods is None:
        return prefetches.Prefetches(api, found, artifacts, view.informer, clock,
                                     delivery=standalone), [found]
    cs = settings.controller_settings
    nodes = informer.Informer(theirs, clients.NODES, clock)
    pods = informer.Informer(theirs, clients.PODS, clock, label_selector=warmup.SELECTOR)
    daemonsets = informer.Informer(theirs, clients.DAEMON_SETS, clock,
                                   namespace=cs.plugin_namespace)
    delivery = warmup.WarmupPods(pods, theirs.create_pod, theirs.delete_pod, clock,
                                 placement.PluginPlacement(plugin_pods, daemonsets, nodes),
                                 image=cs.prefetch_warmup_image,
                                 retry_seconds=cs.prefetch_warmup_retry)
    controller = prefetches.Prefetches(
        api, found, artifacts, view.informer, clock, labels=prefetches.NodeLabels(nodes),
        nodes=nodes, delivery=delivery, owned=pods, failed_recheck=cs.prefetch_warmup_retry)
    return controller, [found, nodes, pods, daemonsets]


def node_stores(
    settings: config.Settings,
    api: inprocess.RegistryClient,
    view: runner.NodeView,
    theirs: kubeapi.KubeApi | None,
    found: cluster.Sources | None,
    cluster_client: kube.Client | None,
    clock: clocks.Clock,
) -> nodestores.NodeStores:
    """The node stores controller (it runs its CSINode informer itself; the NodeModelStores'
    is the NodeView's and the ConfigMaps' comes with ``cluster.sources``)."""
    cs = settings.controller_settings
    base = storesettings.base_of(cs.hub)
    if theirs is None or found is None or cluster_client is None:
        names = [name for name, _ in settings.nodes]
        return nodestores.NodeStores(api, view.informer, nodestores.StaticNodes(names),
                                     nodestores.FixedSettings(base), clock)
    csinodes = informer.Informer(theirs, clients.CSI_NODES, clock)
    watched = storesettings.ConfigMapSettings(
        found.configmaps, namespace=cs.namespace, name=cs.settings_configmap, base=base,
        recorder=found.recorder)
    return nodestores.NodeStores(
        api, view.informer, nodestores.CsiNodes(csinodes, theirs), watched, clock,
        configz=nodestores.KubeConfigz(cluster_client.node_configz))


def once_learned(learning: identities.Learning | None, start: Callable[[], None],
                 tasks: list[asyncio.Task[None]], what: str) -> None:
    """``start()`` now when the worker identity is known (or configured: no ``learning``),
    else in a task once it is learned."""
    if learning is None or learning.known:
        start()
        return
    log.warning("%s start once the worker identity is learned (%s)", what, learning.reason)
    tasks.append(asyncio.create_task(learning.then(start), name=f"{what}: waiting to start"))


def _runner(stores: nodestores.NodeStores, pf: prefetches.Prefetches,
            informers: list[informer.Informer], tasks: list[asyncio.Task[None]],
            learning: identities.Learning | None) -> Hook:
    """Run the node stores and the prefetches on their own (no Lease: every replica converges
    on the same spec and pins, and a write that loses a race is a conflict, read again)."""

    def run() -> None:
        for found in informers:
            tasks.append(asyncio.create_task(found.run(), name=f"informer {found.resource.plural}"))
        tasks.append(asyncio.create_task(stores.run(), name="node stores"))
        tasks.append(asyncio.create_task(pf.run(), name="prefetches"))

    async def start() -> None:
        once_learned(learning, run, tasks, "the node stores and prefetches")

    return start


def worker_token(token_file: pathlib.Path, username: str) -> plugins.TokenSource:
    """The worker's own bearer token from the static token file (what the plugins' shared
    ``--downloads-token-file`` holds in standalone mode), re-read when the file changes."""
    seen: dict[str, object] = {}

    async def read() -> str | None:
        try:
            stamp = token_file.stat().st_mtime_ns
            if seen.get("stamp") != stamp:
                entries = static.parse(token_file.read_text(), source=str(token_file))
                seen["token"] = next((e.token for e in entries if e.name == username), None)
                seen["stamp"] = stamp
        except (OSError, static.TokenFileError) as exc:
            log.warning("cannot read the worker token: %s", type(exc).__name__)
            return None
        token = seen.get("token")
        return token if isinstance(token, str) else None

    return read


def standalone_leadership(settings: config.Settings, registry: build.Registry,
                          clock: clocks.Clock) -> leader.AlwaysLeader | leader.LeaseElector:
    """Without a cluster: processes sharing a store (replicas on one etcd, ``--workers`` on etcd
    or on one SQLite file) elect one leader on a Lease kept in that store; a single server
    process on its own SQLite file always leads."""
    cs = settings.controller_settings
    if settings.storage.backend != "etcd" and settings.storage.workers == 1:
        return leader.AlwaysLeader()
    return leader.LeaseElector(
        leases.StoreLeases(registry.storage), clock, namespace=cs.namespace, name=cs.lease_name,
        identity=cs.identity or cluster.identity(),
        timing=leader.Timing(cs.lease_duration, cs.renew_deadline, cs.retry_period))


async def no_token() -> str | None:
    """No static token file (a server without one): plugins are read without a credential."""
    return None


def client_token(client: kube.Client) -> plugins.TokenSource:
    """In a cluster: the bearer token of the server's own client (the worker's ServiceAccount,
    whatever ``--kubeconfig`` or in-cluster config gives it: a projected token re-read when it
    rotates, a kubeconfig token or token file, an exec plugin's), which the plugins check with
    a TokenReview. None when the client authenticates otherwise (a client certificate)."""

    async def read() -> str | None:
        try:
            return await client.bearer_token()
        except kube.CredentialError as exc:
            log.warning("cannot get the worker's token for the plugins: %s", exc.message)
            return None

    return read


def build_hooks(settings: config.Settings, registry: build.Registry, *,
                cluster_client: kube.Client | None = None,
                clock: clocks.Clock | None = None,
                identity: Callable[[], workers.WorkerIdentity] | None = None,
                learning: identities.Learning | None = None) -> Hooks:
    """``identity``: the worker identity as the server knows it (learned in a cluster); the
    controllers write as it. ``learning`` learns it: they start once it did (no ``learning``:
    the identity is configured, they start at once)."""
    clock = clock or clocks.SystemClock()
    cs = settings.controller_settings
    fixed = workers.WorkerIdentity.configured(settings.worker_username)
    current = identity or (lambda: fixed)
    api = inprocess.RegistryClient(registry, worker=current)
    theirs = kubeapi.KubeApi(cluster_client) if cluster_client is not None else None
    pods: informer.Informer | None = None
    locator: plugins.Locator
    token: plugins.TokenSource
    if theirs is None or cluster_client is None:
        locator = plugins.StaticPlugins(dict(cs.plugin_urls))
        token = (worker_token(settings.token_auth_file, settings.worker_username)
                 if settings.token_auth_file is not None else no_token)
    else:
        pods = informer.Informer(theirs, clients.PODS, clock, namespace=cs.plugin_namespace,
                                 label_selector=cs.plugin_selector)
        locator = plugins.PodPlugins(pods, cs.plugin_port)
        token = client_token(cluster_client)
    reader = plugins.HttpDownloads(locator, token, ca_file=cs.plugin_ca_file)
    view = runner.NodeView(api, clock, reader)
    artifacts = informer.Informer(api, clients.MODEL_ARTIFACTS, clock, resync=runner.RESYNC)
    hooks = Hooks(node_view=view, artifacts=artifacts)

    async def start_view() -> None:
        view.start()
        hooks_tasks.append(asyncio.create_task(artifacts.run(), name="informer modelartifacts"))
        if pods is not None:
            hooks_tasks.append(asyncio.create_task(pods.run(), name="informer plugin pods"))

        async def plug_in() -> None:
            await view.index.wait_synced()
            registry.progress_view.view = view.progress

        hooks_tasks.append(asyncio.create_task(plug_in(), name="progress view"))

    async def stop_view() -> None:
        registry.progress_view.view = None
        for task in hooks_tasks:
            task.cancel()
        await asyncio.gather(*hooks_tasks, return_exceptions=True)
        await view.stop()
        await reader.aclose()

    hooks_tasks: list[asyncio.Task[None]] = []
    hooks.start.append(start_view)
    hooks.stop.append(stop_view)
    if settings.controllers == "none":
        log.info("controllers: none (not run in this process)")
        return hooks
    found = cluster.sources(theirs, cs, clock) if theirs is not None else None
    stores = node_stores(settings, api, view, theirs, found, cluster_client, clock)
    hooks.node_stores = stores
    secret_source: secrets.Secrets = (
        secrets.DirSecrets(cs.secrets_dir, clock) if cs.secrets_dir else secrets.NoSecrets())
    # standalone: the request to each --node plugin (in a cluster, warm-up Pods)
    delivery = (plugindelivery.PluginDelivery(locator, token, secret_source,
                                              ca_file=cs.plugin_ca_file)
                if theirs is None else None)
    pf, pf_informers = prefetch_controller(settings, api, view, artifacts, theirs, clock,
                                           standalone=delivery, plugin_pods=pods)
    hooks.prefetches = pf
    if settings.controllers != "embedded":
        log.info("controllers: %s (node stores and prefetches run here, the rest out of this "
                 "process)", settings.controllers)
        extra = [found.configmaps] if found is not None else []
        hooks.start.append(_runner(stores, pf, [*extra, *pf_informers], hooks_tasks, learning))
        return hooks
    if found is not None:
        running = runner.Worker(api, cs, clock, index=view.index, secret_source=found.secrets,
                                claim_source=found.claims, leadership=found.leadership,
                                informers=[*found.informers, *pf_informers],
                                recorder=found.recorder, node_stores=stores, prefetches=pf,
                                artifacts=artifacts,
                                ledger=proofs.StoreLedger(registry.storage))
        cluster.watch_settings(found, running, cs, settings.data_dir / "controllers")
    else:
        running = runner.Worker(api, cs, clock, index=view.index, secret_source=secret_source,
                                claim_source=claims.AnyClaim(),
                                leadership=standalone_leadership(settings, registry, clock),
                                informers=pf_informers, node_stores=stores, prefetches=pf,
                                artifacts=artifacts,
                                ledger=proofs.StoreLedger(registry.storage))
    hooks.controllers = running

    waiting: list[asyncio.Task[None]] = []

    async def start_controllers() -> None:
        once_learned(learning, running.start, waiting, "the controllers")

    async def stop_controllers() -> None:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await running.stop()

    hooks.start.append(start_controllers)
    hooks.stop.append(stop_controllers)
    return hooks
