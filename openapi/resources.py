"""What the group serves: one ``ResourceInfo`` per resource, the names discovery and routing use."""

from __future__ import annotations

import dataclasses

GROUP = "worker.gpustack.ai"
VERSION = "v1"
GROUP_VERSION = f"{GROUP}/{VERSION}"


@dataclasses.dataclass(frozen=True, slots=True)
class Subresource:
    """A subresource under ``<plural>/{name}/<name>``.

    ``discovered`` says whether discovery advertises it: the ModelArtifact ``status`` path exists
    only for an out-of-process worker and is not part of the public surface (docs/auth.md,
    "Status guards").
    """

    name: str
    verbs: tuple[str, ...]
    kind: str
    discovered: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class ResourceInfo:
    group: str
    version: str
    kind: str
    list_kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    namespaced: bool
    verbs: tuple[str, ...]
    subresources: tuple[Subresource, ...]
    stored: bool = True

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def group_resource(self) -> str:
        """``<plural>.<group>``, the name Kubernetes messages use (``modelartifacts.worker...``)."""
        return f"{self.plural}.{self.group}"

    def subresource(self, name: str) -> Subresource | None:
        for sub in self.subresources:
            if sub.name == name:
                return sub
        return None


CATEGORY = "gpustack"
"""The category every resource of ours is in (``kubectl get gpustack``)."""
WRITABLE = ("create", "delete", "get", "list", "patch", "update", "watch")
"""The verbs of a resource clients create and edit."""
STATUS_VERBS = ("get", "patch", "update")


def _computed(kind: str, subresource: str) -> ResourceInfo:
    """A kind computed per request and never written, served only as
    ``modelartifacts/{name}/<subresource>``."""
    return ResourceInfo(
        group=GROUP, version=VERSION, kind=kind, list_kind="",
        plural=f"modelartifacts/{subresource}", singular="", short_names=(), categories=(),
        namespaced=True, verbs=("get",), subresources=(), stored=False)


def _ours(kind: str, plural: str, short_name: str, *, namespaced: bool,
          verbs: tuple[str, ...] = WRITABLE,
          subresources: tuple[Subresource, ...] = ()) -> ResourceInfo:
    """A stored resource of this group: its list kind, singular and category follow from the
    kind, as Kubernetes names them."""
    return ResourceInfo(
        group=GROUP, version=VERSION, kind=kind, list_kind=f"{kind}List", plural=plural,
        singular=kind.lower(), short_names=(short_name,), categories=(CATEGORY,),
        namespaced=namespaced, verbs=verbs, subresources=subresources,
    )  # fmt: skip


MODEL_ARTIFACT = _ours("ModelArtifact", "modelartifacts", "mart", namespaced=True, subresources=(
    Subresource("progress", ("get",), "ModelArtifactProgress"),
    Subresource("copies", ("get",), "ModelArtifactCopies"),
    Subresource("manifest", ("get",), "ModelArtifactManifest"),
    Subresource("status", STATUS_VERBS, "ModelArtifact", discovered=False)))

NODE_MODEL_STORE = _ours("NodeModelStore", "nodemodelstores", "nms", namespaced=False,
                         verbs=("delete", "get", "list", "watch"),
                         subresources=(Subresource("status", STATUS_VERBS, "NodeModelStore"),))

# A tenant's intent to warm one artifact on a set of nodes (docs/api.md, "ModelPrefetch"). Its
# status is the worker's: like the ModelArtifact's, the status path serves the worker only and is
# not in discovery.
MODEL_PREFETCH = _ours("ModelPrefetch", "modelprefetches", "mpf", namespaced=True, subresources=(
    Subresource("status", STATUS_VERBS, "ModelPrefetch", discovered=False),))

# --- cache governance (issue 39): the pool layer and a namespace's grant ---------------------
# A node pool's cache policy, merged over the cluster settings into each matched node's
# NodeModelStore spec (docs/api.md, "ModelStore"); administrators only.
MODEL_STORE = _ours("ModelStore", "modelstores", "ms", namespaced=False, subresources=(
    Subresource("status", STATUS_VERBS, "ModelStore", discovered=False),))

# A namespace's byte budget and its right to pin, over named ModelStores (docs/api.md,
# "ModelStoreBinding"); administrators only, its status the worker's.
MODEL_STORE_BINDING = _ours("ModelStoreBinding", "modelstorebindings", "msb", namespaced=True,
                            subresources=(Subresource("status", STATUS_VERBS,
                                                      "ModelStoreBinding", discovered=False),))
# --- end cache governance ------------------------------------------------------------------

# Computed per request and never written: a kind without storage, served only as
# ``modelartifacts/{name}/progress``.
MODEL_ARTIFACT_PROGRESS = _computed("ModelArtifactProgress", "progress")

# Computed per request and never written, like the progress, but naming nodes: served only as
# ``modelartifacts/{name}/copies``, under its own grant (never a tenant's by default).
MODEL_ARTIFACT_COPIES = _computed("ModelArtifactCopies", "copies")

# The resolved manifest's files, read from what the resolver kept: served only as
# ``modelartifacts/{name}/manifest``, under its own grant.
MODEL_ARTIFACT_MANIFEST = _computed("ModelArtifactManifest", "manifest")

# The table of stored resources: the registry, the routes, discovery and the OpenAPI documents are
# all built from it (with each kind's schema in ``schema.KINDS`` and, in the server, its strategy).
SERVED: tuple[ResourceInfo, ...] = (MODEL_ARTIFACT, NODE_MODEL_STORE, MODEL_PREFETCH,
                                    MODEL_STORE, MODEL_STORE_BINDING)

# The stored resources, by URL plural.
BY_PLURAL: dict[str, ResourceInfo] = {info.plural: info for info in SERVED}

# Every kind the package describes, the computed views included.
BY_KIND: dict[str, ResourceInfo] = {
    info.kind: info for info in (*SERVED, MODEL_ARTIFACT_PROGRESS, MODEL_ARTIFACT_COPIES,
                                  MODEL_ARTIFACT_MANIFEST)
}
