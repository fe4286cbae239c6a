"""The images, the fixture hub as the Pods see it, and the chart's release on the real node:
what every end-to-end module and the pod-start benchmark start the same way."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import yaml

from devkit import fixturehub, helm
from devkit.realnode import release_values, rig

IMAGES = rig.REPO / ".local" / "images"


def build_images() -> dict[str, pathlib.Path]:
    """``make image``'s archives (the product and the CSI registrar), built or brought up to
    date; their paths by name."""
    build = [sys.executable, str(rig.REPO / "images" / "build.py")]
    for argv in ([*build, "image", "--out", str(IMAGES)],
                 [*build, "registrar", "--binary",
                  str(rig.SHARED / "bin" / "csi-node-driver-registrar.xz"),
                  "--tag", release_values.REGISTRAR_TAG, "--out", str(IMAGES)]):  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise rig.RigError(f"{' '.join(argv)}:\n{done.stdout}\n{done.stderr}")
    tag = release_values.REGISTRAR_TAG
    version = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())["appVersion"]
    return {"model-manager": IMAGES / f"model-manager-{version}.oci.tar",
            "registrar": IMAGES / f"csi-node-driver-registrar-{tag}.oci.tar"}


@contextlib.contextmanager
def hub_on_node() -> Iterator[fixturehub.Hub]:
    """The fixture hub and its CDN listening on the rig's host address, which every Pod reaches
    (as ``python -m devkit.fixturehub --address`` serves an operator's cluster)."""
    with fixturehub.run(address=(rig.NODE_IP, 0)) as served:
        yield served


def install(cluster: rig.Rig, values: dict[str, Any], name: str = "values.yaml") -> None:
    """``helm install`` of the chart into the release's namespace with ``values`` (written to
    ``name`` in the rig's directory, for a failure's reader)."""
    path = cluster.work / name
    path.write_text(yaml.safe_dump(values))
    cluster.kubectl("create", "namespace", release_values.NAMESPACE)
    done = helm.run("install", release_values.RELEASE, str(helm.CHART),
                    "--namespace", release_values.NAMESPACE,
                    "--kubeconfig", str(cluster.kubeconfig), "-f", str(path))  # fmt: skip
    if done.returncode != 0:
        raise rig.RigError(f"helm install:\n{done.stdout}\n{done.stderr}")


def upgrade(cluster: rig.Rig, values: dict[str, Any], name: str) -> None:
    """``helm upgrade`` of the release to ``values`` (written to ``name`` in the rig's
    directory), then the node plugin DaemonSet's rollout waited for: each node runs a plugin
    Pod of the new template, Ready."""
    path = cluster.work / name
    path.write_text(yaml.safe_dump(values))
    done = helm.run("upgrade", release_values.RELEASE, str(helm.CHART),
                    "--namespace", release_values.NAMESPACE,
                    "--kubeconfig", str(cluster.kubeconfig), "-f", str(path))  # fmt: skip
    if done.returncode != 0:
        raise rig.RigError(f"helm upgrade:\n{done.stdout}\n{done.stderr}")
    cluster.kubectl("rollout", "status", "-n", release_values.NAMESPACE,
                    f"daemonset/{release_values.RELEASE}-node", "--timeout=300s",
                    timeout=320)  # fmt: skip
