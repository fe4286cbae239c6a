"""The seam between controllers and the objects they read and write.

``Client`` is what a controller needs from an API server: list, watch, get, and a status write.
Embedded controllers get one over the registry (``apiserver/wiring/inprocess.py``: the same code
path as HTTP requests, with the worker identity's status guard); external controllers and every
kube object (Secrets, claims, Pods) get one over HTTP. Objects are plain dicts, as on the wire.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Protocol

from kube import informer as reflectors
from openapi import resources, wire


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    group: str
    """Empty for the core group."""
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def ours(info: resources.ResourceInfo) -> Resource:
    """One of our own resources, as the one resource table (``openapi.resources.SERVED``) names
    it: a new kind's controller watches ``ours(resources.X)``, nothing here changes."""
    return Resource(info.group, info.version, info.plural, info.kind, info.namespaced)


MODEL_ARTIFACTS = ours(resources.MODEL_ARTIFACT)
NODE_MODEL_STORES = ours(resources.NODE_MODEL_STORE)
MODEL_PREFETCHES = ours(resources.MODEL_PREFETCH)
MODEL_STORES = ours(resources.MODEL_STORE)
MODEL_STORE_BINDINGS = ours(resources.MODEL_STORE_BINDING)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
PODS = Resource("", "v1", "pods", "Pod", True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
NODES = Resource("", "v1", "nodes", "Node", False)
CSI_NODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False)
DAEMON_SETS = Resource("apps", "v1", "daemonsets", "DaemonSet", True)


ListResult = reflectors.Listed
"""A list: its items and the resourceVersion it was read at (the one list-and-watch loop's own
value, so an informer hands it on as it is)."""

WatchEvent = reflectors.Event
"""A watch event: ADDED, MODIFIED, DELETED or BOOKMARK (for a BOOKMARK, only
``metadata.resourceVersion`` is meaningful)."""


class Client(Protocol):
    async def list(self, resource: Resource, *, namespace: str = "",
                   label_selector: str = "") -> ListResult:
        """Every object (all namespaces when ``namespace`` is empty), at one resourceVersion."""
        ...

    def watch(self, resource: Resource, *, resource_version: str, namespace: str = "",
              label_selector: str = "") -> AsyncIterator[WatchEvent]:
        """Changes after ``resource_version``, with bookmarks; raises ``errors.Expired`` when
        that version is gone. The stream may end at any time; callers watch again."""
        ...

    async def get(self, resource: Resource, namespace: str, name: str) -> wire.Obj:
        """One object; ``errors.NotFound`` when it does not exist."""
        ...

    async def update_status(self, resource: Resource, obj: wire.Obj) -> wire.Obj:
        """Replace ``status`` (only) of ``obj``, which carries the resourceVersion it was read
        at; ``errors.Conflict`` when the object changed since."""
        ...


class Writer(Protocol):
    """Creating and updating objects whole: only the in-process client has it, since only the
    worker, inside the API server, creates NodeModelStores and writes their spec (clients
    cannot, over HTTP)."""

    async def create(self, resource: Resource, obj: wire.Obj) -> wire.Obj:
        """``errors.Conflict`` when the name is taken."""
        ...

    async def update(self, resource: Resource, obj: wire.Obj) -> wire.Obj:
        """Replace the object (its status is kept); ``obj`` carries the resourceVersion it was
        read at, ``errors.Conflict`` when it changed since."""
        ...

    async def delete(self, resource: Resource, namespace: str, name: str) -> None:
        """``errors.NotFound`` when it is gone already."""
        ...


class ReadWrite(Client, Writer, Protocol):
    """Both: what a controller that writes our objects whole is given (the in-process client)."""


def key_of(obj: wire.Obj) -> tuple[str, str]:
    """``(namespace, name)``; the namespace is empty for cluster objects."""
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
