"""A node's labels, for what selects nodes (a ModelStore's pool, a prefetch's placement): the
Node informer's in a cluster, kubelet's hostname label alone standalone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from controllers.runtime import informer
from openapi import keys, wire


class Labels(Protocol):
    def labels(self, node: str) -> Mapping[str, str]: ...


class HostnameOnly:
    """Standalone: no Node objects, so a node carries only kubelet's hostname label (how a pool
    or a prefetch names nodes one by one)."""

    def labels(self, node: str) -> Mapping[str, str]:
        return {keys.HOSTNAME: node}


class NodeLabels:
    """In a cluster: the Nodes' labels, from the shared Node informer."""

    def __init__(self, nodes: informer.Informer) -> None:
        self._nodes = nodes

    def labels(self, node: str) -> Mapping[str, str]:
        held = wire.mapping(self._nodes.get("", node), "metadata", "labels")
        return {str(k): str(v) for k, v in held.items()}
