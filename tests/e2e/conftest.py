"""The real cluster, the images and the release, started once for the module.

Skips naming what is missing (``../shared/kube``, root, containerd...), or when another cluster
holds the rig's ports. ``MODEL_MANAGER_E2E=0`` turns it off."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import yaml

from tests.support import fakehub, helm
from tests.support.realnode import forward, release_values, rig

REPO = rig.REPO
IMAGES = REPO / ".local" / "images"
NAMESPACE = release_values.NAMESPACE
RELEASE = release_values.RELEASE


@pytest.fixture(scope="module")
def timings() -> dict[str, float]:
    return {}


@pytest.fixture(scope="module")
def images(timings: dict[str, float]) -> dict[str, pathlib.Path]:
    if os.environ.get("MODEL_MANAGER_E2E") == "0":
        pytest.skip("MODEL_MANAGER_E2E=0")
    lacking = rig.missing()
    if lacking:
        pytest.skip("the real node needs: " + ", ".join(lacking))
    if rig.WORK.exists():
        rig.Rig().down()  # an aborted run's processes, mounts and netns, before judging the ports
    taken = rig.busy()
    if taken:
        pytest.skip("another cluster holds " + ", ".join(taken))
    started = time.monotonic()
    build = [sys.executable, str(REPO / "images" / "build.py")]
    for argv in ([*build, "image", "--out", str(IMAGES)],
                 [*build, "registrar", "--binary",
                  str(rig.SHARED / "bin" / "csi-node-driver-registrar.xz"),
                  "--tag", release_values.REGISTRAR_TAG, "--out", str(IMAGES)]):  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout}\n{done.stderr}"
    timings["images"] = time.monotonic() - started
    tag = release_values.REGISTRAR_TAG
    version = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())["appVersion"]
    return {"model-manager": IMAGES / f"model-manager-{version}.oci.tar",
            "registrar": IMAGES / f"csi-node-driver-registrar-{tag}.oci.tar"}


@pytest.fixture(scope="module")
def cluster(images: dict[str, pathlib.Path], timings: dict[str, float]) -> Iterator[rig.Rig]:
    node = rig.Rig()
    try:
        node.up()
        timings.update(node.timings)
        started = time.monotonic()
        for archive in images.values():
            node.import_image(archive)
        timings["import"] = time.monotonic() - started
        yield node
    finally:
        started = time.monotonic()
        node.down()
        timings["down"] = time.monotonic() - started
        print("\n[e2e] timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()),
              file=sys.stderr)  # fmt: skip


@pytest.fixture(scope="module")
def hub(cluster: rig.Rig) -> Iterator[fakehub.FakeHub]:
    """The fixture hub, named by the rig's host address and forwarded there from loopback."""
    with fakehub.run_fakehub(host=rig.NODE_IP) as served:
        forwarders = [forward.Forwarder(rig.NODE_IP, int(netloc.rsplit(":", 1)[1]))
                      for netloc in (served.hub_netloc, served.cdn_netloc)]  # fmt: skip
        try:
            yield served
        finally:
            for forwarder in forwarders:
                forwarder.close()


@pytest.fixture(scope="module")
def release(cluster: rig.Rig, hub: fakehub.FakeHub, timings: dict[str, float]) -> str:
    started = time.monotonic()
    values = cluster.work / "values.yaml"
    values.write_text(yaml.safe_dump(release_values.values(hub, cluster)))
    cluster.kubectl("create", "namespace", NAMESPACE)
    done = helm.run("install", RELEASE, str(helm.CHART), "--namespace", NAMESPACE,
                    "--kubeconfig", str(cluster.kubeconfig), "-f", str(values))  # fmt: skip
    assert done.returncode == 0, f"helm install:\n{done.stdout}\n{done.stderr}"
    timings["helm install"] = time.monotonic() - started
    return RELEASE
