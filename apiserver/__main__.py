"""``python -m apiserver``: parse flags, prepare standalone state, wire the parts, serve."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import signal
import sys
from collections.abc import Sequence

from starlette.applications import Starlette

import logs
from apiserver.endpoints import podwebhook, resources
from apiserver.flags import cli, config
from apiserver.registry import build
from apiserver.serving import processes, server, tls
from apiserver.storage import interface, sqlite, watchcache
from apiserver.storage.etcd import store as etcd_store
from apiserver.wiring import access, app, embedded, migrations, revisions, standalone
from openapi import resources as openapi_resources

log = logging.getLogger("apiserver")


def main(argv: Sequence[str] | None = None) -> int:
    settings = cli.parse(argv)
    # `kill -USR1 <pid>` dumps every thread's stack to stderr: the way to see a stuck server
    faulthandler.register(signal.SIGUSR1)
    logs.setup(settings.log_level)
    hooks: list[app.StartupHook] = []
    listen_fd = processes.inherited_fd()
    if listen_fd is None:  # once, not again in each server process
        for note in settings.renamed_flags:
            log.warning("%s", note)
    if settings.standalone:
        prepared = standalone.prepare(settings)
        if processes.index() == 0:  # one greeting, not one per server process
            hooks.append(standalone.greeter(prepared))
    if settings.storage.processes > 1 and listen_fd is None:
        return processes.supervise(settings, list(sys.argv[1:] if argv is None else argv))
    serving = server.contexts(settings)
    application = wire(settings, serving, hooks)
    # Everything loaded so far lives as long as the process: keep it out of every collection,
    # and collect less often. With a thousand open watches the default thresholds cost ~10%
    # of the CPU and full collections paused the loop for up to ~240 ms (watch-fanout bench).
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    asyncio.run(server.serve(application, settings, serving,
                             on_stop=application.state.shutdown.begin, listen_fd=listen_fd))
    return 0


def open_storage(settings: config.Settings) -> interface.Store:
    """SQLite under the data directory (shared by the ``--processes``), or etcd behind
    one watch cache per resource."""
    chosen = settings.storage
    if chosen.etcd is None:
        return sqlite.Store(settings.storage_path, shared=chosen.processes > 1)
    backend = etcd_store.Store(chosen.etcd, compaction_interval=chosen.etcd_compaction_interval)
    prefixes = [f"/{info.plural}/" for info in openapi_resources.BY_PLURAL.values()]
    return watchcache.Cache(backend, prefixes)


def auth_for(settings: config.Settings, serving: tls.ServingContexts) -> access.Auth:
    """What authenticates, authorizes and guards requests in this mode."""
    if settings.standalone:
        return access.standalone(settings)
    from apiserver.wiring import delegation  # only cluster mode dials kube-apiserver

    return delegation.delegated(settings, serving)


def wire(settings: config.Settings, serving: tls.ServingContexts,
         hooks: Sequence[app.StartupHook] = ()) -> Starlette:
    auth = auth_for(settings, serving)
    storage = revisions.guarded(settings, open_storage(settings), auth.cluster_client)
    registry = build.build(storage, admission=auth.admission)
    background = embedded.build_hooks(settings, registry, cluster_client=auth.cluster_client,
                                      identity=lambda: auth.admission.facts.worker,
                                      learning=auth.identity)
    if background.artifacts is not None:  # a prefetch's artifact is looked at from here on
        auth.admission.facts.artifacts = embedded.InformerArtifacts(background.artifacts)
        auth.admission.facts.governance = embedded.InformerGovernance(background.controllers)
    async def upgrade() -> None:
        """Stored objects of an older shape, rewritten before the controllers start."""
        await migrations.upgrade_prefetches(registry)

    application = app.build(
        storage=storage,
        authentication=auth.authentication,
        authorization=auth.authorization,
        resource_routes=[*resources.routes(registry, auth.admission), *auth.routes,
                         *podwebhook.routes(embedded.PodFacts(background.controllers))],
        groups=auth.groups,
        # the worker identity is learned (auth.startup) before the controllers start
        startup=[*auth.startup, upgrade, *background.start, *hooks],
        # stopped in reverse: the controllers first, then the revision mark is recorded (on the
        # Lease too), then what they talk to kube-apiserver with
        stop=[*auth.shutdown, storage.flush, *background.stop],
        revisions=storage,
        # not ready while controllers that must run here wait for the worker identity
        checks=[auth.identity] if auth.identity is not None and settings.controllers != "none"
        else [],
        collectors=[auth.identity] if auth.identity is not None else [],
    )
    return application


if __name__ == "__main__":
    raise SystemExit(main())
