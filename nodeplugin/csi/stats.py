"""``NodeGetVolumeStats``: the bytes and inodes of the tree mounted at a target.

A published tree is read-only and never changes, so its usage is measured once
(``cache.trees``) and every answer reports it as full: ``used`` and ``total`` are the tree's
bytes (and inodes), ``available`` is 0. A target this plugin has not published is ``NotFound``,
as the CSI spec asks for a volume that does not exist at that path.
"""

from __future__ import annotations

import asyncio

from nodeplugin import errors
from nodeplugin.cache import targets, trees, volumes
from nodeplugin.csi.gen import csi_pb2


async def volume_stats(
    request: csi_pb2.NodeGetVolumeStatsRequest,
    volume_set: volumes.Volumes,
    tree_facts: trees.Trees,
) -> csi_pb2.NodeGetVolumeStatsResponse:
    if not request.volume_id:
        raise errors.InvalidArgument("volume_id is required")
    if not request.volume_path:
        raise errors.InvalidArgument("volume_path is required")
    missing = errors.NotFound(
        f"no volume is published at {targets.shown(request.volume_path)}")
    try:
        target = volume_set.targets.canonical(request.volume_path)
    except errors.PermissionDenied:
        raise missing from None
    digest = volume_set.references.get(target)
    if digest is None:
        raise missing
    found = await asyncio.to_thread(tree_facts.usage, digest)
    if found is None:
        raise missing
    unit = csi_pb2.VolumeUsage
    return csi_pb2.NodeGetVolumeStatsResponse(usage=[
        unit(available=0, total=found.bytes, used=found.bytes, unit=unit.BYTES),
        unit(available=0, total=found.inodes, used=found.inodes, unit=unit.INODES),
    ])
