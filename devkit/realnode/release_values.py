"""The chart values of the end-to-end release: the locally built images (never pulled), the
fixture hub, and what the rig lacks (a StorageClass, kube-proxy)."""

from __future__ import annotations

from devkit import fixturehub
from devkit.realnode import rig
from openapi import install

NAMESPACE = install.DEFAULT_NAMESPACE
RELEASE = "model-manager"
REGISTRAR_TAG = "v2.17.0"
REGISTRAR = f"localhost/model-manager-test/csi-node-driver-registrar:{REGISTRAR_TAG}"


def values(hub: fixturehub.Hub, cluster: rig.Rig) -> dict[str, object]:
    """The image names and tags stay the chart's defaults: they are what ``make image`` built."""
    # no kube-proxy on the rig: Pods reach kube-apiserver at the node address, not the Service
    direct = [{"name": "KUBERNETES_SERVICE_HOST", "value": rig.NODE_IP},
              {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]  # fmt: skip
    return {
        "image": {"pullPolicy": "Never"},
        "apiserver": {
            "storage": {"sqlite": {"persistence": {"enabled": False}}},
            "extraEnv": direct,
        },
        "settings": {install.HUGGING_FACE_ENDPOINT: hub.endpoint},
        "modelManager": {
            "rootPath": str(cluster.shared_directory(cluster.work / "models")),
            "registrar": {"image": REGISTRAR, "pullPolicy": "Never"},
            "extraEnv": direct,
        },
    }
