"""The CSI gRPC surface: the hand-written ``csi.v1`` subset, error mapping, services, server."""
