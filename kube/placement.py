"""The volume and the node-affinity term for a Pod that mounts one artifact, for callers that
render Pods themselves (``kube.gpustack.ModelManager.placement``): computed by the code the Pod
webhook runs (``openapi.placement``, ``openapi.podvolumes``), from the objects the caller read."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kube import errors
from openapi import placement, podvolumes, volume, wire
from openapi.kinds import modelartifact


class NotMountable(errors.KubeError):
    """The artifact exists but the node plugin would not mount it (not resolved yet, or not a
    hub source)."""

    def __init__(self, namespace: str, name: str, why: str) -> None:
        super().__init__(0, "NotMountable", f"{namespace}/{name}: {why}")


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    """What a Pod that mounts one artifact carries, as the Pod webhooks would make it."""

    volume: wire.Obj
    """The inline CSI volume, its attributes filled (``readOnly``)."""
    nodes: tuple[str, ...]
    """The nodes warm for the artifact's digest: mounting it first, then the most recently used,
    then by name; at most ``openapi.placement.MAX_NODES``; empty when none is."""

    @property
    def preferred_term(self) -> wire.Obj | None:
        """One ``preferredDuringSchedulingIgnoredDuringExecution`` term; None when no node is
        warm (add nothing then)."""
        return placement.preferred_term(self.nodes) if self.nodes else None

    @property
    def required_expression(self) -> wire.Obj | None:
        """A node selector requirement to add to every ``nodeSelectorTerms`` entry, to run only
        where it is warm (what ``worker.gpustack.ai/require-warm-node`` asks of the webhook)."""
        return placement.expression(self.nodes) if self.nodes else None


def check(artifact: wire.Readable) -> None:
    """``NotMountable`` unless the plugin would mount ``artifact``."""
    why = podvolumes.unusable(artifact)
    if why:
        namespace, name = wire.key_of(artifact)
        raise NotMountable(namespace, name, why)


def place(artifact: wire.Readable, stores: Sequence[wire.Readable],
          csinodes: Sequence[wire.Readable] | None, *, volume_name: str = "model") -> Placement:
    """The placement of a Pod mounting ``artifact`` (mountable: ``check``), from every
    NodeModelStore and CSINode (None: no CSINodes to read, a standalone server's nodes, where
    every store's node counts as running the plugin)."""
    check(artifact)
    digest = modelartifact.manifest_digest(artifact)
    plugin_nodes = ({wire.text(obj, "metadata", "name") for obj in csinodes
                     if placement.lists_driver(obj)} if csinodes is not None
                    else {wire.text(obj, "metadata", "name") for obj in stores})
    _, name = wire.key_of(artifact)
    attributes = volume.context(volume.attributes(
        name, wire.text(artifact, "metadata", "uid"), digest))
    return Placement(
        volume={"name": volume_name, "csi": {"driver": volume.DRIVER, "readOnly": True,
                                             "volumeAttributes": attributes}},
        nodes=tuple(placement.warm_nodes(stores, digest, plugin_nodes)))
