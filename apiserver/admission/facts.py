"""What admission knows of the cluster, in one object the mode fills and every rule reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Protocol

from apiserver.auth import authorizer as authorizers
from apiserver.auth import user as users
from apiserver.auth import worker as workers
from openapi import wire

IMAGE_VOLUME_FLOOR = (1, 35)
"""Image volumes are on by default from Kubernetes 1.35; below it a Pod would lose the volume."""

Version = Callable[[], "tuple[int, int] | None"]
"""The (major, minor) of the cluster workloads run on, None when it cannot be read."""


def floor_met() -> tuple[int, int] | None:
    """Standalone mode: no cluster whose Pods could lose an image volume (docs/api.md)."""
    return IMAGE_VOLUME_FLOOR


@dataclasses.dataclass(frozen=True, slots=True)
class PodFacts:
    uid: str
    node_name: str


class PodLookup(Protocol):
    async def pod(self, namespace: str, name: str) -> PodFacts | None:
        """The Pod, None when it does not exist; raises ``webhook.Unavailable``."""
        ...


class Artifacts(Protocol):
    def source_of(self, namespace: str, name: str) -> str | None:
        """The source kind (``openapi.sources``) of the stored ModelArtifact, None when it is not
        known (absent, or not read yet)."""
        ...


class Governance(Protocol):
    """The pool layer as the server's informers hold it (issue 39): what a prefetch's grant
    rules read. Every answer is from memory (admission does not wait)."""

    def ready(self) -> bool:
        """Every informer listed once; before, the rules that read the rest are skipped."""
        ...

    def binding(self, namespace: str, name: str) -> wire.Obj | None:
        """The ModelStoreBinding, None when it does not exist."""
        ...

    def plugin_nodes(self) -> list[tuple[str, str]]:
        """(node, the ModelStore it is merged from, ``""`` for none) for every NodeModelStore."""
        ...

    def labels(self, node: str) -> Mapping[str, str]:
        """The node's labels (standalone: only kubernetes.io/hostname)."""
        ...

    def prefetches(self, namespace: str) -> list[wire.Obj]:
        """The namespace's stored ModelPrefetches."""
        ...

    def artifact(self, namespace: str, name: str) -> wire.Obj | None:
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Plugin:
    """The node plugin's ServiceAccount."""

    namespace: str
    service_account: str

    @property
    def username(self) -> str:
        return users.service_account(self.namespace, self.service_account)


@dataclasses.dataclass
class ClusterFacts:
    """The one object cluster facts reach admission through.

    ``worker`` is set again once the identity is learned (cluster mode, at start);
    ``kubernetes_version`` is asked at every create of an image source; ``pods`` is None without
    a cluster (there is no Pod to look up, so a plugin token must carry its node-name extra);
    ``artifacts`` is set once the server reads its artifacts (``wiring.embedded``), None
    before: a prefetch's artifact is then not looked at; ``governance`` likewise (the pool
    layer's informers: a prefetch's binding, stores and budget), None before; ``authorizer`` is
    the server's own (SubjectAccessReview in a cluster, the local policy standalone), which
    rules that authorize a change ask about the requester (None: such a change is refused)."""

    worker: workers.WorkerIdentity
    plugin: Plugin
    pods: PodLookup | None = None
    kubernetes_version: Version = floor_met
    artifacts: Artifacts | None = None
    governance: Governance | None = None
    authorizer: authorizers.Authorizer | None = None


def standalone(worker_username: str, plugin: Plugin,
               authorizer: authorizers.Authorizer | None = None) -> ClusterFacts:
    """No cluster: a configured worker, no Pods to look up, the image-volume floor met, the
    local policy's ``authorizer``."""
    return ClusterFacts(worker=workers.WorkerIdentity.configured(worker_username), plugin=plugin,
                        authorizer=authorizer)
