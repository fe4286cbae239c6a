"""What the API server runs besides serving: the progress view's NodeModelStore index (always)
and, with ``--controllers=embedded``, the controllers, over an in-process client as the worker.

Returns start and stop hooks for the app's lifespan (after storage starts, before it closes).
The cluster-mode sources (Secrets, claims and plugin Pods through the Kubernetes API, the Lease)
replace the standalone ones once a cluster client is configured; until then the server uses the
standalone sources everywhere.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib
from collections.abc import Awaitable, Callable

from apiserver import config, inprocess
from apiserver.auth import static
from apiserver.auth import user as users
from apiserver.registry import build
from controllers import claims, leader, plugins, secrets, worker
from controllers import clock as clocks

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]


@dataclasses.dataclass
class Hooks:
    start: list[Hook] = dataclasses.field(default_factory=list)
    stop: list[Hook] = dataclasses.field(default_factory=list)
    node_view: worker.NodeView | None = None
    worker: worker.Worker | None = None


def worker_token(token_file: pathlib.Path, username: str) -> plugins.TokenSource:
    """The worker's own bearer token from the static token file (what the plugins' shared
    ``--downloads-token-file`` holds in standalone mode), re-read when the file changes."""
    seen: dict[str, object] = {}

    def read() -> str | None:
        try:
            stamp = token_file.stat().st_mtime_ns
            if seen.get("stamp") != stamp:
                entries = static.parse(token_file.read_text(), source=str(token_file))
                seen["token"] = next((e.token for e in entries if e.name == username), None)
                seen["stamp"] = stamp
        except (OSError, static.TokenFileError) as exc:
            log.warning("cannot read the worker token: %s", type(exc).__name__)
            return None
        token = seen.get("token")
        return token if isinstance(token, str) else None

    return read


def build_hooks(settings: config.Settings, registry: build.Registry,
                clock: clocks.Clock | None = None) -> Hooks:
    clock = clock or clocks.SystemClock()
    cs = settings.controller_settings
    api = inprocess.RegistryClient(
        registry, user=users.UserInfo(settings.worker_username),
        worker_username=settings.worker_username)
    reader = plugins.HttpDownloads(
        plugins.StaticPlugins(dict(cs.plugin_urls)),
        worker_token(settings.token_auth_file, settings.worker_username),
        ca_file=cs.plugin_ca_file)
    view = worker.NodeView(api, clock, reader)
    hooks = Hooks(node_view=view)

    async def start_view() -> None:
        view.start()

        async def plug_in() -> None:
            await view.index.wait_synced()
            registry.progress_view.view = view.progress

        hooks_tasks.append(asyncio.create_task(plug_in(), name="progress view"))

    async def stop_view() -> None:
        registry.progress_view.view = None
        for task in hooks_tasks:
            task.cancel()
        await asyncio.gather(*hooks_tasks, return_exceptions=True)
        await view.stop()
        await reader.aclose()

    hooks_tasks: list[asyncio.Task[None]] = []
    hooks.start.append(start_view)
    hooks.stop.append(stop_view)
    if settings.controllers != "embedded":
        log.info("controllers: %s (not run in this process)", settings.controllers)
        return hooks
    if cs.leader_elect:
        log.warning("--leader-elect needs a cluster client; this server leads alone")
    secret_source: secrets.Secrets = (
        secrets.DirSecrets(cs.secrets_dir, clock) if cs.secrets_dir else secrets.NoSecrets())
    running = worker.Worker(api, cs, clock, index=view.index, secret_source=secret_source,
                            claim_source=claims.AnyClaim(), leadership=leader.AlwaysLeader())
    hooks.worker = running

    async def start_worker() -> None:
        running.start()

    async def stop_worker() -> None:
        await running.stop()

    hooks.start.append(start_worker)
    hooks.stop.append(stop_worker)
    return hooks
