"""``kubectl-model``: parse the arguments kubectl hands the plugin, connect as the caller, run
one subcommand, and turn the product's typed errors into kubectl's way of reporting them
(``Error from server (NotFound): ...`` on stderr, exit code 1)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from rich.console import Console

import kube
from kube import gpustack
from kubectlmodel import connect, nodes, progress, why

PIPE_WIDTH = 4096
EXAMPLES = """examples:
  kubectl model progress qwen -n team-a --watch   # bars per node until it is ready
  kubectl model progress qwen -o json             # the progress subresource as JSON
  kubectl model nodes                             # node caches: use, capacity, content
  kubectl model why qwen                          # why qwen is not ready yet
"""


def _connection_flags(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """kubectl's own flags, accepted before or after the subcommand."""
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("--kubeconfig", default=default,
                        help="the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=default, help="the kubeconfig context to use")
    parser.add_argument("-n", "--namespace", default=default,
                        help="the artifact's namespace (default: the context's)")
    parser.add_argument("--request-timeout", type=float,
                        default=argparse.SUPPRESS if suppress else 30.0,
                        help="seconds to wait for each answer (default 30)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="kubectl model", description="Watch and explain model-manager's deliveries.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _connection_flags(top, suppress=False)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    shown = commands.add_parser(
        "progress", help="draw an artifact's download: a bar per node and the total")
    shown.add_argument("name", help="the ModelArtifact")
    shown.add_argument("-w", "--watch", action="store_true",
                       help="keep refreshing until it is ready on a node and nothing downloads")
    shown.add_argument("-o", "--output", choices=("json",), default="",
                       help="json: print the progress subresource's object")
    shown.add_argument("--interval", type=float, default=1.0,
                       help="seconds between looks with --watch (default 1)")
    listed = commands.add_parser("nodes", help="list the node stores: use, capacity, content")
    explained = commands.add_parser("why", help="explain why an artifact is not ready")
    explained.add_argument("name", help="the ModelArtifact")
    for sub in (shown, listed, explained):
        _connection_flags(sub, suppress=True)
    return top


async def _run(args: argparse.Namespace, console: Console) -> int:
    target = connect.Target(kubeconfig=args.kubeconfig, context=args.context,
                            namespace=args.namespace, request_timeout=args.request_timeout)
    api, namespace = connect.client(target)
    async with gpustack.ModelManager(api, owned=True) as models:
        if args.command == "progress":
            return await progress.run(models, namespace, args.name, watch=args.watch,
                                      output=args.output, console=console, out=sys.stdout,
                                      interval=max(0.1, args.interval))
        if args.command == "nodes":
            return await nodes.run(models, console=console)
        return await why.run(models, namespace, args.name, console=console)


def report(failure: kube.KubeError | kube.ConfigError) -> str:
    """kubectl's spelling of a failure: the server's answer, or what went wrong before one."""
    if isinstance(failure, kube.ConfigError):
        return f"error: {failure}"
    if isinstance(failure, kube.CredentialError) or failure.code == 0:
        return f"error: {failure.message}"
    return f"Error from server ({failure.reason}): {failure.message}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # A pipe gets lines as long as they are (kubectl does not wrap either); a terminal its width.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)
    try:
        return asyncio.run(_run(args, console))
    except (kube.KubeError, kube.ConfigError) as failure:
        print(report(failure), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
