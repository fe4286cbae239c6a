"""Command line: ``python -m nodeplugin --node-name N --endpoint unix:///csi/csi.sock ...``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from nodeplugin import plugin


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nodeplugin",
        description="CSI node plugin for driver model.csi.gpustack.ai: authorizes mounts against "
        "ModelArtifacts, keeps the node's verified model cache and bind-mounts it read-only.",
    )
    p.add_argument("--node-name", default=os.environ.get("NODE_NAME"),
                   help="this node's name, returned as node_id (default: $NODE_NAME)")
    p.add_argument("--endpoint", default=os.environ.get("CSI_ENDPOINT", "unix:///csi/csi.sock"),
                   help="CSI socket, unix:///path (default: $CSI_ENDPOINT or unix:///csi/csi.sock)")
    p.add_argument("--root", default="/var/lib/gpustack/models",
                   help="cache root holding objects/, partial/ and state/ "
                   "(default: /var/lib/gpustack/models)")
    p.add_argument("--kubelet-dir", default="/var/lib/kubelet",
                   help="kubelet's root directory; targets must lie under it "
                   "(default: /var/lib/kubelet)")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG") or None,
                   help="kubeconfig for the API (default: $KUBECONFIG, else the in-cluster "
                   "service account)")
    p.add_argument("--import-dir", default=None,
                   help="materialize digests by importing DIR/<hex>/manifest and the files "
                   "beside it (verified) instead of downloading")
    p.add_argument("--log-level", default="INFO", help="logging level (default: INFO)")
    return p


async def serve(config: plugin.Config) -> None:
    running = await plugin.start(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    logging.getLogger(__name__).info("stopping")
    await running.stop()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not args.node_name:
        print("--node-name (or $NODE_NAME) is required", file=sys.stderr)
        return 2
    config = plugin.Config(
        node_name=args.node_name,
        endpoint=args.endpoint,
        root=args.root,
        kubelet_dir=args.kubelet_dir,
        kubeconfig=args.kubeconfig,
        import_dir=args.import_dir,
    )
    asyncio.run(serve(config))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
