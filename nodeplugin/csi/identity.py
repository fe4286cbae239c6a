"""The CSI Identity service: driver name and version, no controller service, always ready."""

from __future__ import annotations

import grpc

from nodeplugin.csi.gen import csi_pb2, csi_pb2_grpc
from openapi import volume


class Identity(csi_pb2_grpc.IdentityServicer):  # type: ignore[misc]
    def __init__(self, version: str) -> None:
        self._version = version

    async def GetPluginInfo(
        self, request: csi_pb2.GetPluginInfoRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.GetPluginInfoResponse:
        return csi_pb2.GetPluginInfoResponse(name=volume.DRIVER, vendor_version=self._version)

    async def GetPluginCapabilities(
        self, request: csi_pb2.GetPluginCapabilitiesRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.GetPluginCapabilitiesResponse:
        # A node-only plugin: no CONTROLLER_SERVICE, no topology constraints.
        return csi_pb2.GetPluginCapabilitiesResponse()

    async def Probe(
        self, request: csi_pb2.ProbeRequest, context: grpc.aio.ServicerContext
    ) -> csi_pb2.ProbeResponse:
        # Serving this RPC is the liveness fact; the API being unreachable is not a reason to be
        # restarted (mounts say Unavailable instead).
        response = csi_pb2.ProbeResponse()
        response.ready.value = True
        return response
