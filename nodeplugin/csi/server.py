"""The gRPC server on a unix socket (``unix:///csi/csi.sock``) hosting Identity and Node."""

from __future__ import annotations

import contextlib
import os
import pathlib

import grpc

from nodeplugin.csi.gen import csi_pb2_grpc

SCHEME = "unix://"


def socket_path(endpoint: str) -> pathlib.Path:
    """``unix:///csi/csi.sock`` -> ``/csi/csi.sock``; refuses anything but an absolute UDS."""
    if not endpoint.startswith(SCHEME):
        raise ValueError(f"endpoint {endpoint!r} must be unix:///absolute/path.sock")
    path = endpoint[len(SCHEME) :]
    if not path.startswith("/"):
        raise ValueError(f"endpoint {endpoint!r} must name an absolute socket path")
    return pathlib.Path(path)


async def start(
    endpoint: str,
    identity: csi_pb2_grpc.IdentityServicer,
    node: csi_pb2_grpc.NodeServicer,
) -> grpc.aio.Server:
    """Bind the socket (replacing a stale one from a previous run) and start serving."""
    path = socket_path(endpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = grpc.aio.server()
    csi_pb2_grpc.add_IdentityServicer_to_server(identity, server)
    csi_pb2_grpc.add_NodeServicer_to_server(node, server)
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    # Only kubelet and the sidecars (root) talk to the plugin.
    os.chmod(path, 0o600)
    return server
