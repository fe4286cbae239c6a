"""What a controller is, as the assembly sees it: a ``Registration`` (its name, what it needs, how
it is built) and the ``Deps`` every build is handed.

A controller folder's ``wiring.py`` holds its registration and its build; ``assembly.REGISTERED``
lists the registrations, one line each. ``Deps`` gives the same things in both programs (the API
server and ``python -m controllers``): the sources are built on first use, so a controller pays
only for what it touches (a Secret watch, a claim informer, the settings ConfigMap).
"""

from __future__ import annotations

import dataclasses
import enum
import pathlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import kube
from controllers import config
from controllers.nodeview import view as views
from controllers.runtime import client as clients
from controllers.runtime import events, manager, proofs
from controllers.runtime import informer as informers
from controllers.runtime import manifests as manifests_
from controllers.sources import claims as claim_sources
from controllers.sources import kubeapi, kubeevents, kubesecrets, settingsmap
from controllers.sources import plugins as plugin_sources
from controllers.sources import secrets as secret_sources
from timing import clock as clocks


class Need(enum.Enum):
    WRITER = "writer"
    """Creates or updates our objects whole (``client.Writer``): only the in-process client can
    (clients cannot create NodeModelStores or write their spec), so such a controller runs in
    the API server only."""


@dataclasses.dataclass(frozen=True, slots=True)
class Registration:
    name: str
    """The folder's name (``controllers/<name>/wiring.py``), or ``<folder>.<part>`` for a second
    controller of one folder."""
    needs: frozenset[Need]
    build: Callable[[Deps], manager.Runnable]


Close = Callable[[], Awaitable[None]]
Task = Callable[[], Coroutine[Any, Any, None]]


class Deps:
    """What the assembly hands every controller's build."""

    def __init__(
        self,
        *,
        config: config.Settings,
        clock: clocks.Clock,
        api: clients.Client,
        writer: clients.ReadWrite | None,
        cluster: kubeapi.KubeApi | None,
        view: views.NodeView,
        artifacts: informers.Informer,
        plugins: plugin_sources.Locator,
        plugin_pods: informers.Informer | None,
        plugin_token: plugin_sources.TokenSource,
        ledger: proofs.Ledger,
        state_dir: pathlib.Path,
        manifests: manifests_.Keeper | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.api = api
        """Our objects: the in-process client in the API server, ``kubeapi.KubeApi`` outside."""
        self._writer = writer
        self.cluster = cluster
        """kube-apiserver's objects (Pods, Nodes, CSINodes, Secrets, ...); None standalone."""
        self.view = view
        """The NodeModelStore informer (run by the view), the digest index, progress."""
        self.artifacts = artifacts
        """The artifact informer (run with the view: admission reads it too)."""
        self.plugins = plugins
        """Where each node's plugin answers: its Pod in a cluster, ``--node NAME=URL``
        standalone."""
        self.plugin_pods = plugin_pods
        """The node plugin's Pods in a cluster (run with the view); None standalone."""
        self.plugin_token = plugin_token
        """The worker's bearer token for the node plugins."""
        self.ledger = ledger
        """The record of the hub's verifications (the server's storage, or this process's
        memory)."""
        self.manifests = manifests or manifests_.Discard()
        """Where the resolver keeps each resolved manifest (the server's storage; none in
        ``python -m controllers``)."""
        self.state_dir = state_dir
        self.informers: dict[tuple[int, clients.Resource, str, str], informers.Informer] = {}
        """Built through ``informer``: run for the life of the process, waited for before
        leading."""
        self.tasks: list[Task] = []
        """Run from start until stop (a Secret watch)."""
        self.closers: list[Close] = []
        self._secrets: secret_sources.Secrets | None = None
        self._claims: claim_sources.Claims | None = None
        self._settings: settingsmap.SettingsMap | None = None
        self._recorder: events.Recorder | None = None

    @property
    def kube(self) -> kube.Client | None:
        """The client to kube-apiserver (a node's configz), None standalone."""
        return self.cluster.kube if self.cluster is not None else None

    def writer(self) -> clients.ReadWrite:
        """The in-process client, for a registration that needs ``Need.WRITER``."""
        if self._writer is None:
            raise LookupError("this process cannot write our objects whole (no in-process client)")
        return self._writer

    def informer(self, api: clients.Client, resource: clients.Resource, *,
                 namespace: str = "", label_selector: str = "",
                 resync: float | None = None) -> informers.Informer:
        """The informer of ``resource`` over ``api`` (one per resource, namespace and selector,
        shared by every controller that asks)."""
        key = (id(api), resource, namespace, label_selector)
        found = self.informers.get(key)
        if found is None:
            found = self.informers[key] = informers.Informer(
                api, resource, self.clock, namespace=namespace, label_selector=label_selector,
                resync=resync)
        return found

    def on_close(self, close: Close) -> None:
        """Call ``close`` when the controllers stop (a hub client's connections)."""
        self.closers.append(close)

    @property
    def secrets(self) -> secret_sources.Secrets:
        """Hub tokens: a Secret in a cluster (read on demand, watched), ``--secrets-dir``
        standalone, none without either."""
        if self._secrets is None:
            if self.cluster is not None:
                self._secrets = kubesecrets.KubeSecrets(self.cluster, self.clock)
            elif self.config.secrets_dir is not None:
                self._secrets = secret_sources.DirSecrets(self.config.secrets_dir, self.clock)
            else:
                self._secrets = secret_sources.NoSecrets()
            self.tasks.append(self._secrets.run)
        return self._secrets

    @property
    def claims(self) -> claim_sources.Claims:
        """PersistentVolumeClaims: an informer in a cluster; standalone every claim exists."""
        if self._claims is None:
            if self.cluster is None:
                self._claims = claim_sources.AnyClaim()
            else:
                self._claims = claim_sources.ClaimInformer(self.informer(
                    self.cluster, clients.CLAIMS, resync=informers.RESYNC_SECONDS))
        return self._claims

    @property
    def settings(self) -> settingsmap.SettingsMap | None:
        """The settings ConfigMap in a cluster; None standalone."""
        if self._settings is None and self.cluster is not None:
            self._settings = settingsmap.SettingsMap(
                self.informer(self.cluster, clients.CONFIG_MAPS,
                              namespace=self.config.namespace),
                self.config.namespace, self.config.settings_configmap)
        return self._settings

    @property
    def recorder(self) -> events.Recorder:
        """Events: kube-apiserver's in a cluster, the log standalone."""
        if self._recorder is None:
            self._recorder = (kubeevents.KubeRecorder(self.cluster.kube, self.clock)
                              if self.cluster is not None else events.LogRecorder())
        return self._recorder

    @property
    def recorded(self) -> events.Recorder | None:
        """The recorder if anything asked for one (flushed at stop)."""
        return self._recorder
