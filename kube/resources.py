"""lightkube resources for our own group, ``worker.gpustack.ai/v1``.

``ModelArtifact`` (namespaced) and ``NodeModelStore`` (cluster-scoped) are lightkube generic
resources (dict-like objects); each has a ``.Status`` class for its ``status`` subresource, so
``client.patch(NodeModelStore.Status, name, {"status": ...})`` writes only the status.
``ModelPrefetch`` (namespaced) likewise, for the GPUStack helpers' create and delete;
``ModelStore`` (cluster-scoped) and ``ModelStoreBinding`` (namespaced), the pool layer.
"""

from __future__ import annotations

from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_global_resource,
    create_namespaced_resource,
)

from openapi import resources as contract


def _namespaced(info: contract.ResourceInfo) -> type[GenericNamespacedResource]:
    return create_namespaced_resource(contract.GROUP, contract.VERSION, info.kind, info.plural)


def _cluster(info: contract.ResourceInfo) -> type[GenericGlobalResource]:
    return create_global_resource(contract.GROUP, contract.VERSION, info.kind, info.plural)


ModelArtifact = _namespaced(contract.MODEL_ARTIFACT)
NodeModelStore = _cluster(contract.NODE_MODEL_STORE)
ModelPrefetch = _namespaced(contract.MODEL_PREFETCH)
# The pool layer (issue 39): a node pool's cache policy and a namespace's grant.
ModelStore = _cluster(contract.MODEL_STORE)
ModelStoreBinding = _namespaced(contract.MODEL_STORE_BINDING)


def subresource_path(namespace: str, name: str, subresource: str) -> str:
    """A computed subresource of a ModelArtifact (``progress``, ``copies``, ``manifest``; read
    it with ``Client.request``)."""
    return (
        f"/apis/{contract.GROUP}/{contract.VERSION}/namespaces/{namespace}/"
        f"{contract.MODEL_ARTIFACT.plural}/{name}/{subresource}"
    )


def progress_path(namespace: str, name: str) -> str:
    """The ``progress`` subresource of a ModelArtifact (read it with ``Client.request``)."""
    return subresource_path(namespace, name, "progress")
