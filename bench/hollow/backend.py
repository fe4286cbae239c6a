"""The API side of a fleet run: one standalone server on its SQLite file (``replicas`` 0), or
``replicas`` servers on one real etcd (``devkit.harness.etcd``), each with its controllers
embedded; on etcd the replicas elect one controllers leader on a Lease kept in etcd, so one
replica's worker aggregates and the other only serves the API. The fleet is seeded into the
store before any server starts (``fleet.seed``).

Each replica runs with ``POD_NAME=replica-<k>`` (the leader's identity in the Lease is that name
plus a suffix), so ``leader`` names the replica that held the Lease at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pathlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import orjson

from apiserver.storage import interface, sqlite
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import store as etcd_store
from apiserver.wiring import leases
from bench.hollow import fleet as fleets
from devkit.harness import apiserver, etcd
from openapi import install

REPLICA = "replica-"
Seed = Callable[[interface.Store], Coroutine[Any, Any, None]]


@dataclasses.dataclass
class Backend:
    servers: list[apiserver.RunningServer]
    """What the nodes and the scenario's clients talk to: the replicas (or kube-apiserver in
    front of the server, in cluster mode); each ``process`` is an API server replica's."""
    prepared: fleets.Prepared
    member: etcd.Etcd | None = None
    direct: list[apiserver.RunningServer] = dataclasses.field(default_factory=list)
    """The replicas reached directly, for their ``/metrics`` (``servers`` when empty)."""
    others: dict[str, int] = dataclasses.field(default_factory=dict)
    """Further processes whose CPU and RSS are reported, by name (etcd, kube-apiserver)."""

    @property
    def pids(self) -> list[int]:
        return [server.process.pid for server in self.servers]

    @property
    def metrics(self) -> list[apiserver.RunningServer]:
        return self.direct or self.servers

    def leader(self) -> int | None:
        """The replica (index) holding the controllers' Lease; None on SQLite (one server,
        always its own leader)."""
        if self.member is None:
            return None
        found = asyncio.run(_holder(self.member.url))
        if found.startswith(REPLICA):
            return int(found.removeprefix(REPLICA).split("_", 1)[0])
        return None


def _etcd_store(url: str) -> etcd_store.Store:
    return etcd_store.Store(etcd_client.Config((url,)), compaction_interval=0)


async def _holder(url: str) -> str:
    store = _etcd_store(url)
    await store.start()
    try:
        record = await store.get(f"{leases.PREFIX}{install.DEFAULT_NAMESPACE}/{install.LEASE}")
    finally:
        await store.close()
    if record is None:
        return ""
    spec = orjson.loads(record.value).get("spec") or {}
    return str(spec.get("holderIdentity") or "")


@contextlib.contextmanager
def _pod_name(name: str) -> Iterator[None]:
    before = os.environ.get("POD_NAME")
    os.environ["POD_NAME"] = name
    try:
        yield
    finally:
        if before is None:
            del os.environ["POD_NAME"]
        else:
            os.environ["POD_NAME"] = before


@contextlib.contextmanager
def running(prepared: fleets.Prepared, base: pathlib.Path, replicas: int, args: list[str],
            seed: Seed) -> Iterator[Backend]:
    """``replicas`` 0: one server on SQLite; else that many on one etcd under ``base``."""
    with contextlib.ExitStack() as stack:
        member: etcd.Etcd | None = None
        store: interface.Store
        if replicas:
            member = stack.enter_context(etcd.running(base / "etcd"))
            store = _etcd_store(member.url)
            args = [*args, "--storage=etcd", "--etcd-servers", member.url]
        else:
            store = sqlite.Store(prepared.data_dir / "store.db")
        asyncio.run(seed(store))
        backend = Backend([], prepared, member)
        if member is not None and member.process is not None:
            backend.others["etcd"] = member.process.pid
        try:
            for k, port in enumerate(prepared.ports):
                with _pod_name(f"{REPLICA}{k}"):
                    backend.servers.append(apiserver.start(
                        prepared.data_dir, port=port, extra_args=args,
                        log_name=f"{REPLICA}{k}.log" if replicas else "server.log"))
            yield backend
        finally:
            for server in backend.servers:
                with contextlib.suppress(RuntimeError):
                    server.stop()
                server.kill()
