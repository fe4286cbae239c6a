"""The CSI Node service: NodeGetInfo, NodeGetCapabilities, NodePublishVolume, NodeUnpublishVolume
and NodeGetVolumeStats (``stats``).

Publish checks the request's shape, then authorization (before any disk access), then binds a
published tree or hands the digest to the Materializer and answers with its progress. Every other
Node RPC answers UNIMPLEMENTED (the generated base class does that). A digest whose tree failed
an integrity check is simply not published (``cache.integrity`` moved the tree out of use): its
next mount materializes it again. Each publish
outcome is counted in ``mount_results`` (``hit``, ``materialized``, ``denied``, ``pending``) for
the metrics collector to read at scrape time.
"""

from __future__ import annotations

import collections
import logging

import grpc

from nodeplugin import artifacts, authorize, errors
from nodeplugin.cache import targets, trees, volumes
from nodeplugin.csi import errors as csi_errors
from nodeplugin.csi import stats
from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from nodeplugin.materialize import interface
from openapi import columns, sources, states

log = logging.getLogger(__name__)

HIT = "hit"
MATERIALIZED = "materialized"
DENIED = "denied"
PENDING = "pending"


class Node(csi_pb2_grpc.NodeServicer):  # type: ignore[misc]
    def __init__(
        self,
        *,
        node_name: str,
        informer: artifacts.Informer,
        volume_set: volumes.Volumes,
        materializer: interface.Materializer,
        tree_facts: trees.Trees | None = None,
    ) -> None:
        self._node_name = node_name
        self._informer = informer
        self._volumes = volume_set
        self._materializer = materializer
        self._trees = tree_facts or trees.Trees(volume_set.cache)
        self.mount_results: collections.Counter[str] = collections.Counter()
        """Publish outcomes by metric label; read by ``nodeplugin.metrics`` at scrape time."""
        # Digests this plugin answered "not yet" for: their first successful mount counts as
        # ``materialized``, every later one as ``hit``.
        self._awaited: set[str] = set()

    async def NodeGetInfo(
        self, request: csi_pb2.NodeGetInfoRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.NodeGetInfoResponse:
        return csi_pb2.NodeGetInfoResponse(node_id=self._node_name)

    async def NodeGetCapabilities(
        self, request: csi_pb2.NodeGetCapabilitiesRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.NodeGetCapabilitiesResponse:
        # Volume stats only (no staging, no mount group).
        rpc = csi_pb2.NodeServiceCapability.RPC
        return csi_pb2.NodeGetCapabilitiesResponse(capabilities=[
            csi_pb2.NodeServiceCapability(rpc=rpc(type=rpc.GET_VOLUME_STATS)),
        ])

    async def NodeGetVolumeStats(
        self, request: csi_pb2.NodeGetVolumeStatsRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.NodeGetVolumeStatsResponse:
        async with csi_errors.Translate(context, "NodeGetVolumeStats"):
            return await stats.volume_stats(request, self._volumes, self._trees)
        raise AssertionError("Translate aborts the call")  # pragma: no cover

    async def NodePublishVolume(
        self, request: csi_pb2.NodePublishVolumeRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.NodePublishVolumeResponse:
        async with csi_errors.Translate(context, "NodePublishVolume"):
            try:
                result = await self.publish(request)
            except errors.PermissionDenied:
                self.mount_results[DENIED] += 1
                raise
            except (errors.Aborted, errors.Unavailable):
                self.mount_results[PENDING] += 1
                raise
            self.mount_results[result] += 1
        return csi_pb2.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(
        self, request: csi_pb2.NodeUnpublishVolumeRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.NodeUnpublishVolumeResponse:
        async with csi_errors.Translate(context, "NodeUnpublishVolume"):
            await self.unpublish(request)
        return csi_pb2.NodeUnpublishVolumeResponse()

    async def publish(self, request: csi_pb2.NodePublishVolumeRequest) -> str:
        """Mount or raise; returns ``hit`` or ``materialized`` (the metric label)."""
        if not request.volume_id:
            raise errors.InvalidArgument("volume_id is required")
        if not request.target_path:
            raise errors.InvalidArgument("target_path is required")
        if not request.HasField("volume_capability"):
            raise errors.InvalidArgument("volume_capability is required")
        grant = authorize.authorize(
            self._informer,
            kubelet_dir=self._volumes.targets.base,
            target=request.target_path,
            mount_capability=request.volume_capability.HasField("mount"),
            volume_context=request.volume_context,
            walk=False,  # volumes.publish walks the target on its way to the mount
        )
        if await self._volumes.publish(grant.target, grant.digest):
            return self._mounted(grant.digest)
        # Not published: refuse a symlinked target before anything is materialized for it.
        self._volumes.targets.check(grant.target)
        art = grant.artifact
        # Remember that a mount still wants this digest: partial downloads are kept while asked.
        await self._volumes.usage.touch(grant.digest)
        progress = await self._materializer.ensure(
            interface.Request(
                digest=grant.digest,
                source=interface.Source(
                    kind=sources.hub_kind(art.source_kind) or sources.MODEL_SCOPE,
                    repository=art.repository,
                    revision=art.revision,
                    allow_patterns=art.allow_patterns,
                    ignore_patterns=art.ignore_patterns,
                ),
                token=request.secrets.get(sources.SECRET_TOKEN_KEY) or None,
            )
        )
        if progress.state is interface.State.PUBLISHED:
            if await self._volumes.publish(grant.target, grant.digest):
                self._awaited.discard(grant.digest)
                return MATERIALIZED
            raise errors.Internal(f"{grant.digest} was reported published but is not on disk")
        if progress.state is interface.State.DOWNLOADING:
            self._awaited.add(grant.digest)
        raise outcome_error(progress)

    def _mounted(self, digest: str) -> str:
        if digest in self._awaited:
            self._awaited.discard(digest)
            return MATERIALIZED
        return HIT

    async def unpublish(self, request: csi_pb2.NodeUnpublishVolumeRequest) -> None:
        if not request.volume_id:
            raise errors.InvalidArgument("volume_id is required")
        if not request.target_path:
            raise errors.InvalidArgument("target_path is required")
        try:
            target = self._volumes.targets.canonical(request.target_path)
        except errors.PermissionDenied:
            # Nothing this plugin mounts lives outside the kubelet directory: nothing to undo.
            log.info("unpublish of %s outside the kubelet directory: nothing to do",
                     targets.shown(request.target_path))
            return
        # A symlink at or on the way to the target is refused there (PermissionDenied).
        await self._volumes.unpublish(target)


def outcome_error(progress: interface.Progress) -> errors.PluginError:
    """The error a not-yet-mountable digest answers with."""
    digest = progress.digest
    if progress.state is interface.State.DOWNLOADING:
        received = columns.size_text(progress.received_bytes)
        if progress.total_bytes is None:
            return errors.Aborted(f"materializing {digest}: {received} received; listing files")
        total = columns.size_text(progress.total_bytes)
        return errors.Aborted(f"materializing {digest}: {received} of {total} received")
    reason = progress.reason.value if progress.reason is not None else states.FAILED
    detail = f": {progress.message}" if progress.message else ""
    retry = ""
    if progress.retry_time is not None:
        retry = f"; next attempt after {progress.retry_time.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    message = f"materializing {digest} failed ({reason}){detail}{retry}"
    if progress.reason is interface.Reason.INSUFFICIENT_CAPACITY:
        return errors.ResourceExhausted(message)
    return errors.Unavailable(message)

