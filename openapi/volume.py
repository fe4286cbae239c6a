"""The CSI inline volume a Pod mounts a model with: the driver's name and every volume attribute.

A Pod (or a warm-up Pod, the demo, a benchmark) names the artifact by ``attributes``; kubelet adds
its own keys (``csi.storage.k8s.io/...``, with ``podInfoOnMount``) and copies them over any the Pod
sets; the node plugin authorizes the mount by all of them (``nodeplugin/authorize.py``). The one
place these names are spelled (``tests/unit/openapi/test_wire_owners.py``).
"""

from __future__ import annotations

from typing import Final, TypedDict

DRIVER: Final = "model.csi.gpustack.ai"
"""The CSI driver's name (the CSIDriver object, ``GetPluginInfo``, a volume's ``driver``)."""

ARTIFACT: Final = "artifact"
ARTIFACT_UID: Final = "artifactUID"
MANIFEST_DIGEST: Final = "manifestDigest"

POD_NAMESPACE: Final = "csi.storage.k8s.io/pod.namespace"
POD_NAME: Final = "csi.storage.k8s.io/pod.name"
POD_UID: Final = "csi.storage.k8s.io/pod.uid"
SERVICE_ACCOUNT_NAME: Final = "csi.storage.k8s.io/serviceAccount.name"
EPHEMERAL: Final = "csi.storage.k8s.io/ephemeral"
"""kubelet's keys (``podInfoOnMount``): they win over any attribute of the same name a Pod sets."""


class VolumeAttributes(TypedDict):
    """What a Pod's ``volumeAttributes`` name: the artifact, its UID and the digest it expects."""

    artifact: str
    artifactUID: str
    manifestDigest: str


def attributes(name: str, uid: str, digest: str) -> VolumeAttributes:
    """The attributes naming artifact ``name`` (of UID ``uid``) resolved to ``digest``."""
    return VolumeAttributes(artifact=name, artifactUID=uid, manifestDigest=digest)


def context(attributes: VolumeAttributes) -> dict[str, str]:
    """``attributes`` as a plain volume context (what a CSI request carries)."""
    return {ARTIFACT: attributes["artifact"], ARTIFACT_UID: attributes["artifactUID"],
            MANIFEST_DIGEST: attributes["manifestDigest"]}


def kubelet_context(*, namespace: str, pod_name: str, pod_uid: str,
                    service_account: str = "default") -> dict[str, str]:
    """The keys kubelet adds to an inline volume's context, as it does for a Pod's mount."""
    return {POD_NAME: pod_name, POD_NAMESPACE: namespace, POD_UID: pod_uid,
            SERVICE_ACCOUNT_NAME: service_account, EPHEMERAL: "true"}
