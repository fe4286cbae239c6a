"""The resolver's test harness: a real registry (SQLite) reached through the in-process client,
the artifact informer watching it, the fixture hub on loopback, a Secrets directory and a manual
clock. Tests drive ``reconcile`` themselves, one pass at a time, and move the clock."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from apiserver.admission import attributes as admission
from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.storage import sqlite
from apiserver.wiring import inprocess
from apiserver.wiring import manifests as kept_manifests
from apiserver.wiring import proofs as stored
from controllers.resolver import controller as resolver
from controllers.resolver import hubs, passes
from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import events, informer, proofs
from controllers.sources import claims, secrets
from devkit import admitting, fixturehub
from devkit import clock as manual
from hub import config as hub_config
from tests.support import waiting

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
DAY = 86400.0
ADMIN = users.UserInfo("admin", groups=(users.MASTERS, users.AUTHENTICATED))


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def record(self, obj: dict[str, Any], kind: events.Kind, reason: str, message: str) -> None:
        self.seen.append((kind, reason, message))


class RecordingClient:
    """The in-process client, keeping a copy of every status it writes."""

    def __init__(self, inner: inprocess.RegistryClient) -> None:
        self.inner = inner
        self.written: list[dict[str, Any]] = []
        self.list = inner.list
        self.watch = inner.watch
        self.get = inner.get

    async def update_status(self, resource: clients.Resource,
                            obj: dict[str, Any]) -> dict[str, Any]:
        self.written.append(json.loads(json.dumps(obj.get("status") or {})))
        return await self.inner.update_status(resource, obj)


class Harness:
    def __init__(self, hub: fixturehub.Hub, registry: build.Registry, root: pathlib.Path,
                 *, endpoint: str | None = None, ledger: proofs.Ledger | None = None) -> None:
        self.hub = hub
        self.registry = registry
        self.clock = manual.ManualClock()
        self.api = RecordingClient(inprocess.RegistryClient(
            registry, user=users.UserInfo(WORKER), worker_username=WORKER))
        self.secrets_dir = root / "secrets"
        self.secrets_dir.mkdir()
        self.secrets = secrets.DirSecrets(self.secrets_dir, self.clock)
        self.hubs = hubs.Hubs(hub_config.HubConfig(
            huggingface_endpoint=endpoint or hub.endpoint,
            modelscope_endpoint=endpoint or hub.modelscope_endpoint,
            connect_timeout=5, read_timeout=5))
        self.cache = hubs.ListingCache()
        self.informer = informer.Informer(self.api, clients.MODEL_ARTIFACTS, self.clock)
        self.events = Events()
        self.ledger = ledger or stored.StoreLedger(registry.storage)
        self.resolver = resolver.Resolver(
            self.api, self.informer, passes.Passes(self.hubs, self.cache), self.hubs,
            self.secrets, claims.AnyClaim(), self.clock, interval=DAY, recorder=self.events,
            ledger=self.ledger, manifests=kept_manifests.StoreManifests(registry.storage))
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self.informer.run())
        await self.informer.synced.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.hubs.aclose()

    # objects -------------------------------------------------------------------------------

    async def create(self, name: str, spec: dict[str, Any], namespace: str = "a", *,
                     annotations: dict[str, str] | None = None,
                     user: users.UserInfo = ADMIN) -> None:
        """Create as ``user`` (the admin by default: allowed an anchor grant)."""
        metadata: dict[str, Any] = {"name": name}
        if annotations is not None:
            metadata["annotations"] = annotations
        with admission.requested_by(user):
            await self.registry.modelartifacts.create(
                {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
                 "metadata": metadata, "spec": spec}, namespace=namespace)
        await self.synced(name, namespace)

    async def stored(self, name: str, namespace: str = "a") -> dict[str, Any]:
        return await self.registry.modelartifacts.get(namespace, name)

    async def status(self, name: str, namespace: str = "a") -> dict[str, Any]:
        found: dict[str, Any] = (await self.stored(name, namespace)).get("status") or {}
        return found

    async def condition(self, name: str, kind: str = "Resolved") -> tuple[str, str]:
        for c in (await self.status(name)).get("conditions") or []:
            if c["type"] == kind:
                return c["status"], c["reason"]
        return ("", "")

    async def synced(self, name: str, namespace: str = "a") -> None:
        want = (await self.stored(name, namespace))["metadata"]["resourceVersion"]

        def caught_up() -> bool:
            seen = self.informer.get(namespace, name)
            return seen is not None and seen["metadata"]["resourceVersion"] == want

        await waiting.until(caught_up, what=f"informer copy of {name}")

    async def reconcile(self, name: str, namespace: str = "a") -> runtime.Result:
        await self.synced(name, namespace)
        result = await self.resolver.reconcile((namespace, name))
        await self.synced(name, namespace)
        return result

    def secret(self, name: str, token: str | None, namespace: str = "a") -> None:
        """Write (or with None, delete) ``DIR/<ns>/<name>/token`` and let the watcher see it."""
        directory = self.secrets_dir / namespace / name
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "token"
        if token is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(token + "\n")
        self.secrets.scan()


@pytest.fixture
async def registry(tmp_path: pathlib.Path) -> AsyncIterator[build.Registry]:
    store = sqlite.Store(tmp_path / "store.db")
    await store.start()
    try:
        yield build.build(store, admission=admitting.standalone())
    finally:
        await store.close()


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        yield running


@pytest.fixture
async def harness(hub: fixturehub.Hub, registry: build.Registry,
                  tmp_path: pathlib.Path) -> AsyncIterator[Harness]:
    running = Harness(hub, registry, tmp_path)
    await running.start()
    try:
        yield running
    finally:
        await running.close()
