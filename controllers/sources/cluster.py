"""The cluster's sources for the controllers, over a client to kube-apiserver: Secrets (get and
watch), claims (a PersistentVolumeClaim informer), the settings ConfigMap, and the Lease for
leader election. Standalone mode uses ``secrets.DirSecrets``, ``claims.AnyClaim`` and
``leader.AlwaysLeader`` instead.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import socket
import uuid

from controllers import assembly as runner
from controllers import config as settings
from controllers.resolver import settings as clustersettings
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import informer, leader
from controllers.sources import claims, kubeapi, kubeevents, kubesecrets
from timing import clock as clocks

RESYNC = 600.0


@dataclasses.dataclass
class Sources:
    secrets: kubesecrets.KubeSecrets
    claims: claims.ClaimInformer
    leadership: runtime.Leadership
    informers: list[informer.Informer]
    configmaps: informer.Informer
    recorder: kubeevents.KubeRecorder


def identity() -> str:
    """This replica's name in the Lease: the Pod name (``POD_NAME``) or the host, plus a
    random suffix so a restarted replica is a new holder."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


def sources(api: kubeapi.KubeApi, config: settings.Settings, clock: clocks.Clock) -> Sources:
    claims_informer = informer.Informer(api, clients.CLAIMS, clock, resync=RESYNC)
    configmaps = informer.Informer(api, clients.CONFIG_MAPS, clock, namespace=config.namespace)
    leadership: runtime.Leadership = leader.AlwaysLeader()
    if config.leader_elect:
        leadership = leader.LeaseElector(api.leases(), clock, namespace=config.namespace,
                                         name=config.lease_name,
                                         identity=config.identity or identity(),
                                         timing=leader.Timing(config.lease_duration,
                                                              config.renew_deadline,
                                                              config.retry_period))
    return Sources(secrets=kubesecrets.KubeSecrets(api, clock),
                   claims=claims.ClaimInformer(claims_informer), leadership=leadership,
                   informers=[claims_informer, configmaps], configmaps=configmaps,
                   recorder=kubeevents.KubeRecorder(api.kube, clock))


def watch_settings(found: Sources, running: runner.Worker, config: settings.Settings,
                   state_dir: pathlib.Path) -> clustersettings.ClusterSettings:
    """Apply the settings ConfigMap to ``running`` now and on every change."""
    watcher = clustersettings.ClusterSettings(
        found.configmaps, namespace=config.namespace, name=config.settings_configmap,
        base=config.hub, interval=config.revalidate_interval, state_dir=state_dir,
        apply=running.reconfigure)
    return watcher
