"""``python -m controllers``: the controllers in their own process (``--controllers=external`` on
the API server), writing status over HTTP through the worker-only ``/status`` paths.

It runs ``controllers.assembly.build`` in ``PROCESS`` mode: every registered controller that does
not need the API server's in-process client (the resolver, the prefetches' status and delivery, the
pools' and bindings' status, the warm gate); the API server's part of ``external`` runs the others
(the node stores, the prefetches' pins).

``--kubeconfig`` reaches the API serving ``worker.gpustack.ai`` (kube-apiserver, which proxies
the aggregated API, or a standalone server). Secrets, claims, the settings ConfigMap, the Lease,
Nodes and warm-up Pods come from ``--cluster-kubeconfig`` (default: the same cluster), or, with
``--secrets-dir`` and no cluster, from the standalone sources (``--node NAME=URL`` for the
prefetches' requests to the plugins).

The controllers start once the process has learned who it writes as (a SelfSubjectReview over
``--kubeconfig``, asked again with backoff while it fails: ``controllers.runtime.identity``);
``--health-port`` serves ``/readyz`` (failing with the reason until then), ``/livez`` and
``/metrics``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence

import kube
import logs
from controllers import assembly, config, health
from controllers.runtime import errors, identity
from controllers.sources import kubeapi, plugins
from timing import clock as clocks

log = logging.getLogger("controllers")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m controllers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", type=pathlib.Path, default=None,
                   help="kubeconfig for the API serving worker.gpustack.ai (default: in-cluster, "
                   "else $KUBECONFIG)")
    p.add_argument("--cluster-kubeconfig", type=pathlib.Path, default=None,
                   help="kubeconfig for Secrets, claims, the settings ConfigMap, the Lease, Nodes "
                   "and warm-up Pods (default: --kubeconfig's cluster, unless --secrets-dir is "
                   "given)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--health-port", type=int, default=0, metavar="PORT",
                   help="serve /readyz, /livez and /metrics over HTTP on this port "
                   "(default: 0, none)")
    p.add_argument("--health-bind-address", default="0.0.0.0", metavar="ADDRESS",
                   help="the address of --health-port (default: 0.0.0.0)")
    config.add_flags(p)
    config.add_renamed(p, "--workers", "--resolver-concurrency", type=config.positive,
                       metavar="N")
    return p


async def run(args: argparse.Namespace, settings: config.Settings) -> None:
    clock = clocks.SystemClock()
    ours = kube.Client.connect(args.kubeconfig)
    uses_cluster = args.cluster_kubeconfig is not None or args.secrets_dir is None
    theirs = (kube.Client.connect(args.cluster_kubeconfig) if args.cluster_kubeconfig
              else ours) if uses_cluster else None
    state = pathlib.Path(tempfile.mkdtemp(prefix="model-manager-controllers-"))
    api = kubeapi.KubeApi(ours)
    found = assembly.build(assembly.Mode.PROCESS, assembly.Inputs(
        config=settings, clock=clock, api=api, kube=theirs, state_dir=state,
        # standalone, the plugins check the token of the identity this process writes as; in a
        # cluster, they get the token for their own audience (--plugin-token-file), never ours
        plugin_token=None if uses_cluster else plugins.token_of(ours)))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    learning = identity.Learning(whoami(api), clock)
    tasks = [asyncio.create_task(learning.run(), name="learn the worker identity")]
    port = (asyncio.create_task(health.serve(learning, args.health_bind_address,
                                             args.health_port, stop), name="health port")
            if args.health_port else None)
    found.start_view()
    tasks.append(asyncio.create_task(learning.then(found.start_controllers),
                                     name="start the controllers"))
    log.info("controllers against %s: starting once the worker identity is learned",
             ours.cluster.server)
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if port is not None:  # it ends on ``stop``
            await asyncio.gather(port, return_exceptions=True)
        await found.stop()
        await ours.aclose()
        if theirs is not None and theirs is not ours:
            await theirs.aclose()
        shutil.rmtree(state, ignore_errors=True)


def whoami(api: kubeapi.KubeApi) -> identity.Attempt:
    """One attempt at learning who this process writes status as."""

    async def attempt() -> str:
        try:
            name = await api.whoami()
        except errors.ApiError as exc:
            return f"the SelfSubjectReview failed: {exc.code} {exc.message[:200]}"
        log.info("the controllers write as %s (SelfSubjectReview)", name)
        return ""

    return attempt


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.leader_elect and args.secrets_dir is not None and args.cluster_kubeconfig is None:
        p.error("--leader-elect needs a cluster for its Lease (--cluster-kubeconfig)")
    if config.problem(args):
        p.error(f"--leader-elect-renew-deadline: {config.problem(args)}")
    logs.setup(args.log_level)
    for note in config.renamed(args):
        log.warning("%s", note)
    try:
        asyncio.run(run(args, config.from_args(args)))
    except kube.ConfigError as exc:
        print(f"python -m controllers: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
