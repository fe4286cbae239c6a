"""The controller set for a mode: ``build(mode, inputs)``, called by the API server
(``apiserver/wiring/embedded.py``) and by ``python -m controllers`` alike.

``REGISTERED`` is the one table of controllers; adding one is a folder under ``controllers/`` and
one line here (docs/architecture.md, "How to add a controller"). A mode runs the registrations
its process can serve: a controller that needs the in-process client (``Need.WRITER``) runs only
in the API server, so ``--controllers=external`` splits the set between the server's part and
``python -m controllers`` without losing or doubling one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import pathlib

import kube
from controllers import config, registration
from controllers.bindings import wiring as bindings
from controllers.nodestores import wiring as nodestores
from controllers.nodeview import view as views
from controllers.nodeview import warm as warmth
from controllers.prefetches import inputs as prefetch_inputs
from controllers.prefetches import wiring as prefetches
from controllers.resolver import wiring as resolver
from controllers.runtime import client as clients
from controllers.runtime import informer, leader, manager, proofs
from controllers.runtime import manifests as manifests_
from controllers.sources import kubeapi, plugins
from controllers.warmgate import wiring as warmgate
from timing import clock as clocks

log = logging.getLogger(__name__)

REGISTERED: tuple[registration.Registration, ...] = (
    resolver.REGISTRATION,  # needs: -
    prefetches.STATUS,  # needs: - (status over HTTP; warm-up Pods through the cluster)
    nodestores.REGISTRATION,  # needs: WRITER
    nodestores.POOLS,  # needs: - (ModelStore status)
    prefetches.PINS,  # needs: WRITER
    bindings.REGISTRATION,  # needs: - (ModelStoreBinding status)
    warmgate.REGISTRATION,  # needs: - (patches gated Pods in kube-apiserver; idle standalone)
)


class Mode(enum.Enum):
    EMBEDDED = "embedded"
    """``--controllers=embedded``: every controller, in the API server."""
    SERVER_PART = "external"
    """``--controllers=external``, the API server's half: the controllers that need its
    in-process client, on every replica (they converge on the same spec and pins)."""
    PROCESS = "process"
    """``python -m controllers``: the controllers that write through a client over HTTP."""
    VIEW_ONLY = "none"
    """``--controllers=none``: the NodeView and the artifact informer only."""


def selected(mode: Mode) -> tuple[registration.Registration, ...]:
    """The registrations ``mode`` runs."""
    if mode is Mode.EMBEDDED:
        return REGISTERED
    if mode is Mode.SERVER_PART:
        return tuple(r for r in REGISTERED if registration.Need.WRITER in r.needs)
    if mode is Mode.PROCESS:
        return tuple(r for r in REGISTERED if registration.Need.WRITER not in r.needs)
    return ()


@dataclasses.dataclass
class Inputs:
    """What a program hands in; ``build`` turns it into ``registration.Deps`` the same way for
    both programs."""

    config: config.Settings
    clock: clocks.Clock
    api: clients.Client
    """Our objects: the in-process client, or ``kubeapi.KubeApi`` over ``--kubeconfig``."""
    state_dir: pathlib.Path
    writer: clients.ReadWrite | None = None
    """The in-process client (the API server only)."""
    kube: kube.Client | None = None
    """kube-apiserver (cluster mode); None standalone."""
    leadership: manager.Leadership | None = None
    """None: the Lease in kube-apiserver with ``--leader-elect`` in a cluster, else always lead."""
    plugin_token: plugins.TokenSource | None = None
    """None: in a cluster the projected token for the plugins' audience
    (``--plugin-token-file``); no token standalone."""
    ledger: proofs.Ledger | None = None
    """The record of the hub's verifications (anchors' proofs): the server's storage; None, in
    this process's memory (``python -m controllers``)."""
    manifests: manifests_.Keeper | None = None
    """Where the resolver keeps each resolved manifest: the server's storage; None, nowhere
    (``python -m controllers``)."""
    live_progress: bool = False
    """Read the plugins' running downloads for ``progress`` (the API server answers it)."""


@dataclasses.dataclass
class PoolInformers:
    """What admission reads of the pool layer (``apiserver.admission.grants``): the ModelStore
    bindings, the prefetches and, in a cluster, the Nodes' labels; run on every replica with the
    NodeView, whatever the mode."""

    bindings: informer.Informer
    prefetches: informer.Informer
    nodes: informer.Informer | None

    def all(self) -> list[informer.Informer]:
        found = [self.bindings, self.prefetches]
        return [*found, self.nodes] if self.nodes is not None else found


class ControllerSet:
    """The controllers of one process, the NodeView and the artifact informer they read, and the
    manager that runs the controllers while this replica leads."""

    def __init__(self, mode: Mode, deps: registration.Deps,
                 running: list[tuple[str, manager.Runnable]], leadership: manager.Leadership,
                 reader: plugins.HttpDownloads | None, pools: PoolInformers,
                 csinodes: informer.Informer | None = None) -> None:
        self.mode = mode
        self.deps = deps
        self.view = deps.view
        self.artifacts = deps.artifacts
        self.pools = pools
        """The pool layer's informers every replica runs for admission (issue 39)."""
        self.controllers = dict(running)
        self.warm = deps.warm
        """The nodes warm for a digest (the Pod webhook's placement term)."""
        self._csinodes = csinodes
        self._reader = reader
        self.manager = manager.Manager(
            list(deps.informers.values()), [c for _, c in running], leadership,
            shared=[deps.artifacts, deps.view.informer])
        self._view_tasks: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    def names(self) -> list[str]:
        """The registrations this set runs."""
        return list(self.controllers)

    def start_view(self) -> None:
        """The read side, whatever the mode: the NodeModelStore and artifact informers (and the
        plugin Pods and the CSINodes in a cluster)."""
        self.view.start()
        found = [self.artifacts, *self.pools.all()]
        if self.deps.plugin_pods is not None:
            found.append(self.deps.plugin_pods)
        if self._csinodes is not None:
            found.append(self._csinodes)
        for each in found:
            self._view_tasks.append(asyncio.create_task(
                each.run(), name=f"informer {each.resource.plural}"))

    def start_controllers(self) -> None:
        """The controllers' sources, informers and the manager (nothing in ``VIEW_ONLY``)."""
        if not self.controllers:
            return
        self._started = True
        for run in self.deps.tasks:
            self._tasks.append(asyncio.create_task(run(), name="controller source"))
        self.manager.start()

    async def stop(self) -> None:
        """Controllers first (the key in hand finishes), then what they read."""
        if self._started:
            await self.manager.stop()
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        recorder = self.deps.recorded
        if recorder is not None:
            await recorder.flush()
        for close in self.deps.closers:
            await close()
        for task in self._view_tasks:
            task.cancel()
        await asyncio.gather(*self._view_tasks, return_exceptions=True)
        await self.view.stop()
        if self._reader is not None:
            await self._reader.aclose()


def build(mode: Mode, inputs: Inputs) -> ControllerSet:
    cfg = inputs.config
    cluster = kubeapi.KubeApi(inputs.kube) if inputs.kube is not None else None
    if inputs.plugin_token is not None:
        token = inputs.plugin_token
    elif inputs.kube is not None:  # never the API token: a plugin could replay it
        token = plugins.token_file(cfg.plugin_token_file)
    else:
        token = plugins.NO_TOKEN
    pods: informer.Informer | None = None
    csinodes: informer.Informer | None = None
    locator: plugins.Locator
    plugin_nodes: warmth.PluginNodes
    if cluster is None:
        locator = plugins.StaticPlugins(dict(cfg.plugin_urls))
        plugin_nodes = warmth.StaticPluginNodes(name for name, _ in cfg.nodes)
    else:
        csinodes = informer.Informer(cluster, clients.CSI_NODES, inputs.clock)
        plugin_nodes = warmth.CsiPluginNodes(csinodes)
        pods = informer.Informer(cluster, clients.PODS, inputs.clock,
                                 namespace=cfg.plugin_namespace,
                                 label_selector=cfg.plugin_selector)
        locator = plugins.PodPlugins(pods, cfg.plugin_port)
    reader = (plugins.HttpDownloads(locator, token, ca_file=cfg.plugin_ca_file)
              if inputs.live_progress else None)
    view = views.NodeView(inputs.api, inputs.clock, reader)
    artifacts = informer.Informer(inputs.api, clients.MODEL_ARTIFACTS, inputs.clock,
                                  resync=informer.RESYNC_SECONDS)
    pool_informers = PoolInformers(
        bindings=informer.Informer(inputs.api, clients.MODEL_STORE_BINDINGS, inputs.clock),
        prefetches=informer.Informer(inputs.api, clients.MODEL_PREFETCHES, inputs.clock),
        nodes=informer.Informer(cluster, clients.NODES, inputs.clock)
        if cluster is not None else None)
    deps = registration.Deps(
        config=cfg, clock=inputs.clock, api=inputs.api, writer=inputs.writer, cluster=cluster,
        view=view, artifacts=artifacts, plugins=locator, plugin_pods=pods, plugin_token=token,
        ledger=inputs.ledger if inputs.ledger is not None else proofs.InMemory(),
        state_dir=inputs.state_dir, manifests=inputs.manifests,
        warm=warmth.WarmNodes(view.index, view.informer, plugin_nodes))
    running: list[tuple[str, manager.Runnable]] = []
    for each in selected(mode):
        if registration.Need.WRITER in each.needs and inputs.writer is None:
            raise ValueError(f"controller {each.name} needs the in-process client (it writes "
                             "our objects whole); it runs in the API server only")
        running.append((each.name, each.build(deps)))
    leadership: manager.Leadership
    if mode is Mode.SERVER_PART:
        leadership = leader.AlwaysLeader()  # every replica converges on the same spec and pins
    elif inputs.leadership is not None:
        leadership = inputs.leadership
    elif cfg.leader_elect and cluster is not None:
        leadership = leader.LeaseElector(
            cluster.leases(), inputs.clock, namespace=cfg.namespace, name=cfg.lease_name,
            identity=cfg.identity or leader.identity(), timing=cfg.lease)
    else:
        leadership = leader.AlwaysLeader()
    if running:
        log.info("controllers (%s): %s", mode.value, ", ".join(name for name, _ in running))
    # the copies view names a prefetch's target nodes as the prefetch controllers compute them
    watched = prefetch_inputs.Inputs(
        pool_informers.prefetches, artifacts, view.informer,
        prefetch_inputs.NodeLabels(pool_informers.nodes)
        if pool_informers.nodes is not None else None, pool_informers.bindings)
    view.copies.targets = watched.targets
    return ControllerSet(mode, deps, running, leadership, reader, pool_informers, csinodes)
