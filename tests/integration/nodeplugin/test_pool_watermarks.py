"""A pool collects at its own watermarks (issue 39): the standalone server with its embedded
controllers and two ``python -m nodeplugin`` processes, each a node with its own cache on a small
tmpfs and its own plugin identity (a token bound to a Pod on that node, as a cluster issues one
per plugin Pod). A ModelStore selecting node-1 states watermarks lower than the cluster's; both
caches are filled past the pool's high watermark and under the cluster's. node-1 collects down to
the pool's low watermark, oldest first; node-2, outside the pool, keeps every tree until the pool
takes it in too, and then collects the same way."""

from __future__ import annotations

import datetime
import pathlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from apiserver.auth import static
from apiserver.flags import cli
from apiserver.wiring import kubeconfig, standalone
from devkit.harness import apiserver as support
from nodeplugin.cache import layout
from openapi.kinds import nodemodelstore
from tests.integration.nodeplugin import store_harness as harness
from tests.integration.nodeplugin.csi_harness import PluginProcess
from tests.support import pools, waiting

GROUP = "/apis/worker.gpustack.ai/v1"
NODES = ("node-1", "node-2")
POOL = "large-disks"
POOL_HIGH, POOL_LOW = 40, 20
CACHE_MIB = 64
TREES, TREE_MIB = 10, 3  # 30 MiB of 64: past the pool's 40%, under the cluster's 80%
HOUR = datetime.timedelta(hours=1)
MIB = harness.MIB


def _identities(data_dir: pathlib.Path) -> dict[str, str]:
    """One plugin identity per node in the server's token file before its first start (the
    server keeps each bound to its node); their tokens by node."""
    settings = cli.parse(["--standalone", "--data-dir", str(data_dir)])
    entries = {node: standalone.plugin_entry(node, settings) for node in NODES}
    data_dir.mkdir(parents=True)
    static.write(data_dir / "tokens.csv", entries.values())
    return {node: entry.token for node, entry in entries.items()}


def _fill(cache_dir: pathlib.Path, node: str) -> list[str]:
    """``TREES`` trees of ``TREE_MIB`` each, tree 0 used longest ago (an hour apart)."""
    cache = layout.Layout(cache_dir)
    now = datetime.datetime.now(datetime.UTC)
    digests = [harness.publish_tree(cache, f"t{i}", {"w.bin": bytes([1 + i]) * TREE_MIB * MIB})
               for i in range(TREES)]
    harness.write_usage(cache, {d: now - (TREES + 1 - i) * HOUR for i, d in enumerate(digests)})
    return digests


def _store(admin: httpx.Client, node: str) -> dict[str, Any]:
    found: dict[str, Any] = admin.get(f"{GROUP}/nodemodelstores/{node}").json()
    return found


def _applied(admin: httpx.Client, node: str) -> dict[str, Any] | None:
    """The node's store once its plugin applied the spec and reported usage under it."""
    found = _store(admin, node)
    observed = (found.get("status") or {}).get("observedGeneration")
    reported = nodemodelstore.used_percent(found) is not None
    return found if reported and observed == found["metadata"]["generation"] else None


def _watermarks(store: dict[str, Any]) -> tuple[int | None, int | None]:
    return nodemodelstore.high_percent(store), nodemodelstore.low_percent(store)


@pytest.fixture
def world(mount_guard: pathlib.Path) -> Iterator[tuple[support.RunningServer,
                                                       dict[str, PluginProcess]]]:
    tokens = _identities(mount_guard / "api")
    with support.running(mount_guard / "api", extra_args=[
            "--controllers=embedded", *(f"--node={node}" for node in NODES)]) as server:
        plugins: dict[str, PluginProcess] = {}
        for node in NODES:
            config = mount_guard / f"{node}.kubeconfig"
            kubeconfig.write(config, server=server.url, ca_file=server.ca_file,
                             token=tokens[node], user=node)  # fmt: skip
            plugins[node] = PluginProcess(mount_guard / f"plugin-{node}", config, import_dir=None,
                                          extra_args=["--node-name", node])  # fmt: skip
            harness.mount_tmpfs(plugins[node].root, CACHE_MIB)
        try:
            yield server, plugins  # a failure's report has the plugins' logs (conftest)
        finally:
            for plugin in plugins.values():
                plugin.close()


def test_a_pool_collects_at_its_own_watermarks_and_a_node_outside_it_does_not(
    world: tuple[support.RunningServer, dict[str, PluginProcess]],
) -> None:
    server, plugins = world
    digests = {node: _fill(plugins[node].root, node) for node in NODES}
    full = {node: harness.used_bytes(plugins[node].root) for node in NODES}
    total = harness.total_bytes(plugins["node-1"].root)
    low = total * POOL_LOW // 100
    assert all(total * POOL_HIGH // 100 < used < total * 80 // 100 for used in full.values())
    with server.client() as admin:
        pools.store(admin, POOL, {"kubernetes.io/hostname": "node-1"},
                    watermarks={"highPercent": POOL_HIGH, "lowPercent": POOL_LOW})
        pools.merged(admin, ["node-1"], POOL)
        outside = _store(admin, "node-2")
        assert not outside["spec"].get("store") and _watermarks(outside) == (80, 70), outside
        assert _watermarks(_store(admin, "node-1")) == (POOL_HIGH, POOL_LOW)
        # node-2 first: it applies the cluster's watermarks, and its cache stays past the pool's
        plugins["node-2"].start()
        held = waiting.polled("node-2 applied its spec", lambda: _applied(admin, "node-2"))
        assert (nodemodelstore.used_percent(held) or 0) >= POOL_HIGH, held["status"]
        # node-1, in the pool: down to the pool's low watermark, oldest first
        plugins["node-1"].start()
        cache = layout.Layout(plugins["node-1"].root)
        waiting.polled("node-1 collected to the pool's low watermark",
                       lambda: harness.used_bytes(plugins["node-1"].root) <= low,
                       timeout=90)  # fmt: skip
        kept = [d for d in digests["node-1"] if cache.is_published(d)]
        assert kept == digests["node-1"][TREES - len(kept):] and len(kept) >= 2, kept
        def under_low() -> dict[str, Any] | None:
            found = _applied(admin, "node-1")
            return found if found and (nodemodelstore.used_percent(found) or 100) <= POOL_LOW \
                else None

        reported = waiting.polled("node-1 reports its usage under the pool's low watermark",
                                  under_low)
        assert reported["spec"]["store"] == POOL
        # node-2 had longer than node-1 needed, under the same spec-applied trigger: it kept all
        other = layout.Layout(plugins["node-2"].root)
        assert all(other.is_published(d) for d in digests["node-2"])
        assert harness.used_bytes(plugins["node-2"].root) >= full["node-2"]
        # the pool takes node-2 in: it collects at the pool's watermarks too
        patched = admin.patch(f"{GROUP}/modelstores/{POOL}",
                              json={"spec": {"nodeSelector": {"kubernetes.io/hostname": None}}},
                              headers={"Content-Type": "application/merge-patch+json"})
        assert patched.status_code == 200, patched.text
        pools.merged(admin, ["node-2"], POOL)
        waiting.polled("node-2 collected to the pool's low watermark",
                       lambda: harness.used_bytes(plugins["node-2"].root) <= low,
                       timeout=90)  # fmt: skip
        kept = [d for d in digests["node-2"] if other.is_published(d)]
        assert kept == digests["node-2"][TREES - len(kept):] and len(kept) >= 2, kept
