"""Assemble and run the node plugin: cache start-up, informer, CSI server, shutdown.

Start-up order matters: references are rebuilt from the live mount table and stray partial
directories removed *before* the socket serves, so a restart never forgets a mounted Pod; the
socket serves Identity and NodeGetInfo at once, while mounts answer Unavailable until the informer's
first list completes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable

import grpc

from nodeplugin import apiclient, artifacts, kubeconfig
from nodeplugin.cache import fsutil, layout, locks, mounter, refs, usage, volumes
from nodeplugin.csi import identity, node, server
from nodeplugin.materialize import interface, local

log = logging.getLogger(__name__)
VERSION = "0.1.0"


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    node_name: str
    endpoint: str
    root: str
    kubelet_dir: str
    kubeconfig: str | None = None
    import_dir: str | None = None


@dataclasses.dataclass
class Plugin:
    """The running pieces (tests and benchmarks reach in through these fields)."""

    config: Config
    cache: layout.Layout
    informer: artifacts.Informer
    volume_set: volumes.Volumes
    materializer: interface.Materializer
    server: grpc.aio.Server
    client: apiclient.ArtifactClient
    informer_task: asyncio.Task[None]
    started_seconds: float
    """Time from ``start`` to serving (references rebuilt, socket bound)."""

    async def stop(self, grace: float = 2.0) -> None:
        await self.server.stop(grace)
        self.informer_task.cancel()
        await asyncio.gather(self.informer_task, return_exceptions=True)
        await self.materializer.close()
        await self.client.aclose()


def clean_partials(cache: layout.Layout) -> list[str]:
    """Remove partial directories that belong to no attempt (no resumable record) and strays."""
    removed: list[str] = []
    for partial in cache.partials():
        if not partial.resumable:
            fsutil.remove_tree(partial.path)
            removed.append(partial.path.name)
    for stray in cache.stray_partials():
        fsutil.remove_tree(stray)
        removed.append(stray.name)
    return removed


async def rebuild_references(
    cache: layout.Layout, read: Callable[[], str] = refs.read_mountinfo
) -> refs.References:
    found = refs.scan(refs.parse_mountinfo(read()), str(cache.objects))
    return refs.References({target: layout.digest_of_hex(h) for target, h in found.items()})


def default_materializer(config: Config, cache: layout.Layout) -> interface.Materializer:
    if config.import_dir:
        return local.LocalImporter(cache, config.import_dir)
    return _Unconfigured()


class _Unconfigured:
    """Without a source of content every new digest fails at once, saying why."""

    async def ensure(self, request: interface.Request) -> interface.Progress:
        return interface.Progress(
            request.digest,
            interface.State.FAILED,
            reason=interface.Reason.INVALID_REQUEST,
            message="this plugin has no materializer configured (no --import-dir)",
        )

    def running(self) -> list[interface.Progress]:
        return []

    async def close(self) -> None:
        return None


async def start(
    config: Config,
    *,
    client: apiclient.ArtifactClient | None = None,
    materializer: interface.Materializer | None = None,
    mount: mounter.Mounter | None = None,
) -> Plugin:
    began = time.monotonic()
    cache = layout.Layout(config.root)
    cache.create()
    removed = await asyncio.to_thread(clean_partials, cache)
    if removed:
        log.info("removed %d partial directories that belong to no attempt", len(removed))
    references = await rebuild_references(cache)
    usage_store = usage.UsageStore(cache.state_file(usage.FILE_NAME))
    usage_store.load()
    published = await asyncio.to_thread(cache.published)
    await usage_store.reconcile(references.digests(), published)
    log.info("cache %s: %d published trees, %d live mounts", cache.root, len(published),
             len(references))
    if client is None:
        connection = (
            kubeconfig.load(config.kubeconfig) if config.kubeconfig else kubeconfig.in_cluster()
        )
        client = apiclient.HttpArtifactClient(connection)
    informer = artifacts.Informer(client)
    volume_set = volumes.Volumes(
        cache,
        mount=mount or mounter.LinuxMounter(),
        references=references,
        usage_store=usage_store,
        digest_locks=locks.DigestLocks(),
    )
    if materializer is None:
        materializer = default_materializer(config, cache)
    node_service = node.Node(
        node_name=config.node_name,
        kubelet_dir=os.path.normpath(config.kubelet_dir),
        informer=informer,
        volume_set=volume_set,
        materializer=materializer,
    )
    grpc_server = await server.start(config.endpoint, identity.Identity(VERSION), node_service)
    task = asyncio.create_task(informer.run(), name="artifact informer")
    elapsed = time.monotonic() - began
    log.info("serving CSI on %s as node %s (started in %.3fs)", config.endpoint, config.node_name,
             elapsed)
    return Plugin(config, cache, informer, volume_set, materializer, grpc_server, client, task,
                  elapsed)
