"""The real cluster, the images and the release, started once for the module.

Skips naming what is missing (``$MODEL_MANAGER_SHARED_KUBE``, root, containerd...), or when
another cluster holds the rig's ports. ``MODEL_MANAGER_E2E=0`` turns it off."""

from __future__ import annotations

import os
import pathlib
import sys
import time
from collections.abc import Iterator

import pytest

from devkit import fixturehub
from devkit.realnode import deploy, release_values, rig

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
    built = deploy.build_images()
    timings["images"] = time.monotonic() - started
    return built


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
def hub(cluster: rig.Rig) -> Iterator[fixturehub.Hub]:
    with deploy.hub_on_node() as served:
        yield served


@pytest.fixture(scope="module")
def release(cluster: rig.Rig, hub: fixturehub.Hub, timings: dict[str, float]) -> str:
    """The chart installed with the end-to-end values (``release_values``); a module that needs
    other values overrides this fixture."""
    started = time.monotonic()
    deploy.install(cluster, release_values.values(hub, cluster))
    timings["helm install"] = time.monotonic() - started
    return RELEASE
