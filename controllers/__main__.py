"""``python -m controllers``: the controllers in their own process (``--controllers=external`` on
the API server), writing status through ``.../modelartifacts/{name}/status`` over HTTP.

``--kubeconfig`` reaches the API serving ModelArtifacts and NodeModelStores (kube-apiserver,
which proxies the aggregated API, or a standalone server). Secrets, claims, the settings
ConfigMap and the Lease come from ``--cluster-kubeconfig`` (default: the same cluster), or, with
``--secrets-dir`` and no cluster, from the standalone sources.

The controllers start once the process has learned who it writes as (a SelfSubjectReview over
``--kubeconfig``, asked again with backoff while it fails: ``controllers.runtime.identity``);
``--health-port`` serves ``/readyz`` (failing with the reason until then), ``/livez`` and
``/metrics``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import pathlib
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence

import kube
import logs
from controllers import assembly as runner
from controllers import config as settings
from controllers import health
from controllers.runtime import errors, identity, leader
from controllers.sources import claims, cluster, kubeapi, secrets
from timing import clock as clocks

log = logging.getLogger("controllers")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m controllers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", type=pathlib.Path, default=None,
                   help="kubeconfig for the API serving worker.gpustack.ai (default: in-cluster, "
                   "else $KUBECONFIG)")
    p.add_argument("--cluster-kubeconfig", type=pathlib.Path, default=None,
                   help="kubeconfig for Secrets, claims, the settings ConfigMap and the Lease "
                   "(default: --kubeconfig's cluster, unless --secrets-dir is given)")
    p.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE") or "gpustack-system",
                   help="the worker's namespace: its Lease and settings ConfigMap "
                   "(default: $POD_NAMESPACE or gpustack-system)")
    p.add_argument("--workers", type=int, default=8, metavar="N",
                   help="artifacts resolved at once (default: 8)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--health-port", type=int, default=0, metavar="PORT",
                   help="serve /readyz, /livez and /metrics over HTTP on this port "
                   "(default: 0, none)")
    p.add_argument("--health-bind-address", default="0.0.0.0", metavar="ADDRESS",
                   help="the address of --health-port (default: 0.0.0.0)")
    settings.add_flags(p, serving=False)
    return p


def configure(args: argparse.Namespace) -> settings.Settings:
    return settings.Settings(
        hub=settings.hub_from(args), revalidate_interval=args.revalidate_interval,
        secrets_dir=args.secrets_dir, settings_configmap=args.settings_configmap,
        namespace=args.namespace, leader_elect=args.leader_elect,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period, resolver_workers=args.workers)


async def run(args: argparse.Namespace, config: settings.Settings) -> None:
    clock = clocks.SystemClock()
    ours = kube.Client.connect(args.kubeconfig)
    uses_cluster = args.cluster_kubeconfig is not None or args.secrets_dir is None
    theirs = (kube.Client.connect(args.cluster_kubeconfig) if args.cluster_kubeconfig
              else ours) if uses_cluster else None
    api = kubeapi.KubeApi(ours)
    view = runner.NodeView(api, clock, None)
    state = pathlib.Path(tempfile.mkdtemp(prefix="model-manager-controllers-"))
    if theirs is not None:
        found = cluster.sources(kubeapi.KubeApi(theirs), config, clock)
        running = runner.Worker(api, config, clock, index=view.index,
                                secret_source=found.secrets, claim_source=found.claims,
                                leadership=found.leadership, informers=found.informers,
                                recorder=found.recorder)
        cluster.watch_settings(found, running, config, state)
    else:
        assert config.secrets_dir is not None
        running = runner.Worker(api, config, clock, index=view.index,
                                secret_source=secrets.DirSecrets(config.secrets_dir, clock),
                                claim_source=claims.AnyClaim(),
                                leadership=leader.AlwaysLeader())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    learning = identity.Learning(whoami(api), clock)
    tasks = [asyncio.create_task(learning.run(), name="learn the worker identity")]
    port = (asyncio.create_task(health.serve(learning, args.health_bind_address,
                                             args.health_port, stop), name="health port")
            if args.health_port else None)
    view.start()
    tasks.append(asyncio.create_task(learning.then(running.start), name="start the controllers"))
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
        await running.stop()
        await view.stop()
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
    if args.leader_elect_renew_deadline >= args.leader_elect_lease_duration:
        p.error("--leader-elect-renew-deadline must be shorter than the lease duration")
    logs.setup(args.log_level)
    try:
        asyncio.run(run(args, configure(args)))
    except kube.ConfigError as exc:
        print(f"python -m controllers: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
