"""``client.Client`` (and ``leader.LeaseApi``) over ``kube.Client``: how external controllers
reach our resources (status written through ``.../modelartifacts/{name}/status``), and how any
controller reaches cluster objects (Secrets, claims, Pods, ConfigMaps, Leases, Nodes, CSINodes,
the plugin's DaemonSets).

Objects cross as plain dicts (``kube.decoding.plain``); lightkube's models are built and taken
apart in ``controllers`` here and in ``kubeevents.py`` only (an import-linter contract keeps
lightkube out of the rest of the package, outside ``controllers.sources``). Our own
kinds' models come from ``kube.resources``, one for every row of ``openapi.resources.SERVED``.
``kube.errors`` become ``controllers.runtime.errors`` here, once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

from lightkube.resources import apps_v1, coordination_v1, core_v1, storage_v1

import kube
from controllers.runtime import client as clients
from controllers.runtime import errors
from kube import resources as ours
from kube.decoding import plain
from openapi import resources, wire

MODELS: dict[clients.Resource, Any] = {
    **{clients.ours(info): getattr(ours, info.kind) for info in resources.SERVED},
    clients.SECRETS: core_v1.Secret,
    clients.CLAIMS: core_v1.PersistentVolumeClaim,
    clients.PODS: core_v1.Pod,
    clients.CONFIG_MAPS: core_v1.ConfigMap,
    clients.LEASES: coordination_v1.Lease,
    clients.NODES: core_v1.Node,
    clients.CSI_NODES: storage_v1.CSINode,
    clients.CSI_DRIVERS: storage_v1.CSIDriver,
    clients.DAEMON_SETS: apps_v1.DaemonSet,
}


def translate(exc: kube.KubeError) -> errors.ApiError:
    if isinstance(exc, kube.AlreadyExists):
        return errors.Conflict(exc.message, code=409)
    return errors.from_status(exc.code or 503, exc.message)


def _model(resource: clients.Resource) -> Any:
    try:
        return MODELS[resource]
    except KeyError:
        raise errors.NotFound(f"no client model for {resource.plural}") from None


class KubeApi:
    def __init__(self, kube_client: kube.Client) -> None:
        self.kube = kube_client

    async def list(self, resource: clients.Resource, *, namespace: str = "",
                   label_selector: str = "") -> clients.ListResult:
        model = _model(resource)
        try:
            listed = await self.kube.list(
                model, namespace=(namespace or "*") if resource.namespaced else None,
                labels=label_selector or None)
        except kube.KubeError as exc:
            raise translate(exc) from None
        return clients.ListResult([plain(o) for o in listed.items], listed.resource_version)

    async def watch(self, resource: clients.Resource, *, resource_version: str,
                    namespace: str = "", label_selector: str = ""
                    ) -> AsyncIterator[clients.WatchEvent]:
        model = _model(resource)
        # With bookmarks, as the protocol promises: a quiet resource's version moves on, so a
        # resumed watch rarely finds it compacted. An empty version starts a fresh watch (every
        # object replayed as ADDED).
        stream = self.kube.watch(
            model, namespace=(namespace or "*") if resource.namespaced else None,
            labels=label_selector or None, resource_version=resource_version or None,
            bookmarks=True)
        try:
            async for kind, obj in stream:
                if kind in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    yield clients.WatchEvent(kind, plain(obj))
        except kube.KubeError as exc:
            raise translate(exc) from None

    async def whoami(self) -> str:
        """The user this client acts as (a SelfSubjectReview); raises ``errors.ApiError``."""
        try:
            found = await self.kube.self_subject_review()
        except kube.KubeError as exc:
            raise translate(exc) from None
        name = found.get("username")
        if not isinstance(name, str) or not name:
            raise errors.ApiError("the SelfSubjectReview names no user")
        return name

    async def get(self, resource: clients.Resource, namespace: str, name: str) -> wire.Obj:
        try:
            found = await self.kube.get(_model(resource), name,
                                        namespace=namespace if resource.namespaced else None)
        except kube.KubeError as exc:
            raise translate(exc) from None
        return plain(found)

    async def update_status(self, resource: clients.Resource, obj: wire.Obj) -> wire.Obj:
        model = _model(resource)
        status_model = getattr(model, "Status", None)
        if status_model is None:
            raise errors.NotFound(f"{resource.plural} has no status subresource here")
        namespace, _ = clients.key_of(obj)
        try:
            written = await self.kube.replace(
                status_model.from_dict(obj), namespace=namespace if resource.namespaced else None)
        except kube.KubeError as exc:
            raise translate(exc) from None
        return plain(written)

    # the prefetches' warm-up Pods (controllers/prefetches/warmup.py) -------------------------

    async def create_pod(self, pod: wire.Obj) -> wire.Obj:
        """A Pod (the prefetches' warm-up Pods); ``errors.Conflict`` when the name is taken."""
        try:
            created = await self.kube.create(
                cast(core_v1.Pod, core_v1.Pod.from_dict(pod)),
                namespace=str(pod["metadata"]["namespace"]))
        except kube.KubeError as exc:
            raise translate(exc) from None
        return plain(created)

    async def delete_pod(self, namespace: str, name: str) -> None:
        try:
            await self.kube.delete(core_v1.Pod, name, namespace=namespace)
        except kube.KubeError as exc:
            raise translate(exc) from None

    # leader.LeaseApi ----------------------------------------------------------------------

    def leases(self) -> LeaseClient:
        return LeaseClient(self.kube)


class LeaseClient:
    def __init__(self, kube_client: kube.Client) -> None:
        self._kube = kube_client

    async def get(self, namespace: str, name: str) -> wire.Obj:
        try:
            return plain(await self._kube.get(coordination_v1.Lease, name, namespace=namespace))
        except kube.KubeError as exc:
            raise translate(exc) from None

    async def create(self, lease: wire.Obj) -> wire.Obj:
        try:
            created = await self._kube.create(_lease(lease))
        except kube.KubeError as exc:
            raise translate(exc) from None
        return plain(created)

    async def update(self, lease: wire.Obj) -> wire.Obj:
        try:
            replaced = await self._kube.replace(_lease(lease))
        except kube.KubeError as exc:
            raise translate(exc) from None
        return plain(replaced)



def _lease(lease: wire.Obj) -> coordination_v1.Lease:
    return cast(coordination_v1.Lease, coordination_v1.Lease.from_dict(lease))
