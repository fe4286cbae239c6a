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

from apiserver import app, cli, config, server, standalone
from apiserver.auth import static
from apiserver.endpoints import resources
from apiserver.registry import build
from apiserver.storage import sqlite


def main(argv: Sequence[str] | None = None) -> int:
    settings = cli.parse(argv)
    # `kill -USR1 <pid>` dumps every thread's stack to stderr: the way to see a stuck server
    faulthandler.register(signal.SIGUSR1)
    logging.basicConfig(
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    hooks: list[app.StartupHook] = []
    if settings.standalone:
        prepared = standalone.prepare(settings)
        hooks.append(standalone.greeter(prepared))
    application = wire(settings, hooks)
    # Everything loaded so far lives as long as the process: keep it out of every collection,
    # and collect less often. With a thousand open watches the default thresholds cost ~10%
    # of the CPU and full collections paused the loop for up to ~240 ms (watch-fanout bench).
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    asyncio.run(server.serve(application, settings, on_stop=application.state.shutdown.begin))
    return 0


def wire(settings: config.Settings, hooks: Sequence[app.StartupHook] = ()) -> Starlette:
    storage = sqlite.Store(settings.storage_path)
    registry = build.build(storage)
    seeds = [standalone.seeder(registry, name) for name in settings.seed_nodemodelstores]
    return app.build(
        storage=storage,
        authenticator=static.load(settings.token_auth_file),
        resource_routes=resources.routes(registry),
        worker_username=settings.worker_username,
        startup=[*seeds, *hooks],
    )


if __name__ == "__main__":
    raise SystemExit(main())
