"""A prefetch stored in the shape before the pool layer (``spec.targets``) keeps working after an
upgrade: the server rewrites it at start into ``placement.nodeSelector`` on
``kubernetes.io/hostname`` (and ``matchLabels``), ``minReady`` moved up, its status kept."""

from __future__ import annotations

import pathlib

from apiserver.admission import chain, facts
from apiserver.registry import build
from apiserver.storage import sqlite
from apiserver.wiring import migrations
from devkit import admitting
from openapi import keys, resources


def _old_server(store: sqlite.Store) -> build.Registry:
    """A registry whose admission has no conversion: what an older server stored."""
    full = admitting.standalone()
    older = chain.Chain(facts.standalone(admitting.WORKER, admitting.PLUGIN),
                        writers=full.writers, mutating=[],
                        validating=[rule for rule in full.validating
                                    if rule.name not in ("PrefetchGrant", "PrefetchSpec")])
    return build.build(store, admission=older)


async def test_a_stored_old_shape_prefetch_is_rewritten_at_start(tmp_path: pathlib.Path) -> None:
    store = sqlite.Store(tmp_path / "store.db")
    await store.start()
    try:
        old = _old_server(store)
        await old.modelprefetches.create({
            "apiVersion": resources.GROUP_VERSION, "kind": "ModelPrefetch",
            "metadata": {"name": "warm", "namespace": "team-a"},
            "spec": {"artifactRef": {"name": "qwen"}, "retention": {"pinned": True},
                     "targets": {"nodeNames": ["node-2", "node-1"], "minReady": 1}}})
        await old.modelprefetches.create({
            "apiVersion": resources.GROUP_VERSION, "kind": "ModelPrefetch",
            "metadata": {"name": "pool", "namespace": "team-a"},
            "spec": {"artifactRef": {"name": "qwen"}, "targets": {"nodeSelector": {"a": "b"}}}})
        stored = await old.modelprefetches.get("team-a", "warm")
        await old.modelprefetches.update_status(
            {**stored, "status": {"desiredNodes": 2}}, namespace="team-a", name="warm")
        assert "targets" in (await old.modelprefetches.get("team-a", "warm"))["spec"]

        upgraded = build.build(store, admission=admitting.standalone())
        assert await migrations.upgrade_prefetches(upgraded) == 2
        warm = await upgraded.modelprefetches.get("team-a", "warm")
        assert warm["spec"] == {
            "artifactRef": {"name": "qwen"}, "retention": {"pinned": True}, "minReady": 1,
            "placement": {"nodeSelector": {"matchExpressions": [
                {"key": keys.HOSTNAME, "operator": "In", "values": ["node-1", "node-2"]}]}}}
        assert warm["status"] == {"desiredNodes": 2}  # the status is kept
        pool = await upgraded.modelprefetches.get("team-a", "pool")
        assert pool["spec"]["placement"] == {"nodeSelector": {"matchLabels": {"a": "b"}}}
        assert "bindingRef" not in pool["spec"]  # not held to stores until given one
        assert await migrations.upgrade_prefetches(upgraded) == 0  # nothing left to rewrite
    finally:
        await store.close()
