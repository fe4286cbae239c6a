"""The real cluster with a second real node (``vm2``, ``node-ns-up``), for the two-node
end-to-end tests (``tests/e2e/test_two_nodes.py``: placement, then node-to-node sync) and
``make bench BENCH=placement``: the rig up, the node added, the images imported into both
nodes' containerds, the chart's values with a cache root each node has its own copy of, and
the waits for both nodes' plugins."""

from __future__ import annotations

import pathlib
import time
from typing import Any

from devkit import fixturehub
from devkit.realnode import objects, release_values, rig
from openapi import reasons
from openapi.kinds import modelprefetch, nodemodelstore

NODE_B = 2
"""``node-ns-up``'s N: the node ``vm2``."""
WARMUP_IMAGE = "localhost/model-manager-test/busybox:e2e"  # not :latest, so IfNotPresent


def up(cluster: rig.Rig, images: dict[str, pathlib.Path], timings: dict[str, float]) -> str:
    """Start ``cluster`` with node B and import ``images`` into both nodes; B's name."""
    cluster.up()
    name = cluster.add_node(NODE_B)
    timings.update(cluster.timings)
    started = time.monotonic()
    for archive in images.values():
        cluster.import_image(archive)
        cluster.import_image_on(NODE_B, archive)
    timings["import"] = time.monotonic() - started
    return name


def values(hub: fixturehub.Hub, cluster: rig.Rig) -> dict[str, Any]:
    """The end-to-end values with ``rig.CACHE_ROOT`` as the cache (each node's own) and the
    warm-up Pods' image under a fixed tag on node A (the prefetches warm A)."""
    cluster.shared_directory(rig.CACHE_ROOT)
    cluster.tag_image(objects.BUSYBOX, WARMUP_IMAGE)
    found: dict[str, Any] = release_values.values(hub, cluster)
    found["modelManager"]["rootPath"] = str(rig.CACHE_ROOT)
    found["apiserver"]["controllers"] = {"prefetchWarmupImage": WARMUP_IMAGE}
    return found


def wait_both_ready(cluster: rig.Rig) -> None:
    """Both nodes' NodeModelStores Ready (each plugin runs and reports)."""
    names = (cluster.node_name, cluster.extra[NODE_B])

    def ready() -> bool:
        stores = [objects.json_of(cluster, "get", "nodemodelstore", name) for name in names]
        return all(objects.condition(s, reasons.READY) == "True" for s in stores)

    cluster.wait("both nodes' NodeModelStores Ready", ready, timeout=300,
                 namespace=release_values.NAMESPACE)


def wait_peers(cluster: rig.Rig) -> dict[str, str]:
    """Both nodes' NodeModelStores Ready, each with the peer URL its plugin published
    (``status.peer.url``: only a plugin started with node-to-node sync publishes one); the URLs
    by node name."""
    names = (cluster.node_name, cluster.extra[NODE_B])

    def published() -> dict[str, str] | None:
        stores = {n: objects.json_of(cluster, "get", "nodemodelstore", n) for n in names}
        urls = {n: nodemodelstore.peer_url(s) for n, s in stores.items()}
        ready = all(nodemodelstore.ready(s) for s in stores.values())
        return urls if ready and all(urls.values()) else None

    found = cluster.wait("both nodes' NodeModelStores Ready with a peer URL", published,
                         timeout=300, namespace=release_values.NAMESPACE)
    assert isinstance(found, dict)
    return found


def prefetch(cluster: rig.Rig, namespace: str, name: str, artifact: str, node: str) -> None:
    """A ModelPrefetch of ``artifact`` onto ``node``, waited for until the node holds it."""
    objects.grant(cluster, namespace)
    cluster.apply(objects.prefetch_manifest(namespace, name, artifact, node))

    def warm() -> bool:
        got = objects.json_of(cluster, "get", "modelprefetches", name, "-n", namespace)
        return modelprefetch.counts(got)[1] == 1

    cluster.wait(f"ModelPrefetch {namespace}/{name} Ready on {node}", warm, timeout=300,
                 namespace=namespace)
