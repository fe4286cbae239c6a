"""A fleet of hollow nodes against a real standalone API server.

``prepare`` readies the server's data directory before its first start: the standalone files
(``apiserver.wiring.standalone.prepare``), one plugin identity per node in its token file (each a
Pod-bound token on its own node, ``standalone.plugin_entry``), a kubeconfig per node, the worker's
token for the nodes' ``/model/downloads``, and a serving certificate covering every node's
loopback address.
``seed`` stores the fleet as it runs before the scenario begins: the artifacts, resolved, each
with ``status.nodes`` counting the nodes that hold it, and every node's NodeModelStore listing what
it holds (so the hollow nodes' start is a plugin restart on a running fleet: their first writes
change no count). ``Fleet`` spawns the processes of hollow nodes (``process.run``) and talks to
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import hashlib
import multiprocessing
import pathlib
from collections.abc import Iterator, Sequence
from multiprocessing import connection
from typing import Any

from apiserver.auth import static
from apiserver.flags import cli
from apiserver.registry import build
from apiserver.storage import interface
from apiserver.wiring import kubeconfig, standalone
from bench.hollow import process
from certs import authority
from devkit import admitting
from devkit.harness import apiserver
from openapi import anchors, install, reasons, sources, states, wire
from openapi.kinds import modelartifact
from timing import clock as clocks

NAMESPACE = install.DEFAULT_NAMESPACE
SIZE = 10 << 30
"""Every model is 10 GiB."""


def node_name(index: int) -> str:
    return f"node-{index:05d}"


def address(index: int) -> str:
    """Each node's HTTPS port on a loopback address of its own, as nodes are separate hosts."""
    return f"127.{1 + index // 62500}.{1 + index // 250 % 250}.{1 + index % 250}"


def digest(index: int) -> str:
    return "sha256:" + hashlib.sha256(f"model-{index}".encode()).hexdigest()


def artifact_key(index: int, namespaces: int) -> tuple[str, str]:
    return f"tenant-{index % namespaces:02d}", f"model-{index:05d}"


@dataclasses.dataclass(frozen=True, slots=True)
class Prepared:
    ports: list[int]
    """One per API server replica; node ``i`` talks to replica ``i % len(ports)``."""
    data_dir: pathlib.Path
    node_args: list[str]
    setups: list[process.Setup]
    plugin_ca: pathlib.Path


def prepare(base: pathlib.Path, nodes: int, holds: Sequence[Sequence[int]], processes: int,
            replicas: int = 1) -> Prepared:
    """``holds[i]``: the artifacts whose digests node ``i`` holds at start. ``replicas`` servers
    share the data directory (its CA, serving certificate and tokens, as replicas on one etcd
    do), each on its own port; the nodes are split between them (node ``i`` on ``i %
    replicas``), as a Service would spread the plugins' connections."""
    data_dir = base / "api"
    ports = [apiserver.free_port() for _ in range(replicas)]
    settings = cli.parse(["--standalone", "--data-dir", str(data_dir), "--port", str(ports[0]),
                          "--bind", "127.0.0.1"])
    prepared = standalone.prepare(settings)
    entries = static.parse((data_dir / "tokens.csv").read_text())
    worker = next(e.token for e in entries if e.name == settings.worker_username)
    mine = [standalone.plugin_entry(node_name(i), settings) for i in range(nodes)]
    static.write(data_dir / "tokens.csv", [*entries, *mine])
    ca_file = authority.Files.under(data_dir).ca_cert
    urls = [f"https://127.0.0.1:{port}" for port in ports]
    configs = kubeconfigs(base, [(urls[i % replicas], ca_file, entry.token)
                                 for i, entry in enumerate(mine)])
    setups, node_args, plugin_ca = nodes_setup(base, configs, holds, processes, worker)
    del prepared
    return Prepared(ports, data_dir, node_args, setups, plugin_ca)


def kubeconfigs(base: pathlib.Path, nodes: Sequence[tuple[str, pathlib.Path, str]]
                ) -> list[pathlib.Path]:
    """Node ``i``'s kubeconfig for ``nodes[i]`` = (server URL, its CA file, the node's token)."""
    configs = base / "nodes"
    configs.mkdir()
    paths = []
    for i, (url, ca_file, token) in enumerate(nodes):
        path = configs / f"{node_name(i)}.kubeconfig"
        kubeconfig.write(path, server=url, ca_file=ca_file, token=token, user=node_name(i))
        paths.append(path)
    return paths


def nodes_setup(base: pathlib.Path, configs: Sequence[pathlib.Path],
                holds: Sequence[Sequence[int]], processes: int, worker_token: str
                ) -> tuple[list[process.Setup], list[str], pathlib.Path]:
    """The processes' setups (node ``i`` in process ``i % processes``, on its own loopback
    address, accepting ``worker_token``), the server's ``--node`` flags for them, and the CA of
    the nodes' serving certificate."""
    token_file = base / "worker-token"
    token_file.write_text(worker_token)
    addresses = [address(i) for i in range(len(configs))]
    tls = authority.ensure(base / "plugin-tls", addresses)
    specs = [process.Spec(node_name(i), str(path), addresses[i],
                          [(digest(k), SIZE) for k in holds[i]])
             for i, path in enumerate(configs)]
    setups = [process.Setup(specs[k::processes], NAMESPACE, apiserver.free_port(),
                            str(tls.cert), str(tls.key), str(token_file))
              for k in range(processes)]
    node_args = [f"--node={spec.name}=https://{spec.address}:{setup.port}"
                 for setup in setups for spec in setup.nodes]
    return setups, node_args, tls.ca_cert


async def seed(store: interface.Store, artifacts: int, namespaces: int,
               holds: Sequence[Sequence[int]]) -> None:
    """``artifacts`` hub artifacts, resolved to ``digest(i)``, spread over ``namespaces``; node
    ``n`` holds the artifacts ``holds[n]``. Each artifact is resolved and validated now, so the
    resolver (its hub unreachable here) leaves it alone for ``--revalidate-interval``."""
    holders: dict[int, int] = {}
    for held in holds:
        for k in held:
            holders[k] = holders.get(k, 0) + 1
    now = clocks.rfc3339(datetime.datetime.now(datetime.UTC))
    await store.start()
    try:
        registry = build.build(store, admission=admitting.standalone())

        async def node(n: int) -> None:
            created = await registry.nodemodelstores.create(
                {"metadata": {"name": node_name(n)}, "spec": {}})
            created["status"] = {"models": [
                {"digest": digest(k), "state": states.READY, "sizeBytes": SIZE,
                 "downloadedBytes": SIZE} for k in sorted(holds[n], key=digest)]}
            await registry.nodemodelstores.update_status(created, name=node_name(n))

        async def one(i: int) -> None:
            namespace, name = artifact_key(i, namespaces)
            created = await registry.modelartifacts.create({
                "metadata": {"name": name, "labels": {"app": "fleet"}},
                "spec": {"source": {sources.HUGGING_FACE: {"repository": f"org/model-{i}"}}}},
                namespace=namespace)
            created["status"] = {
                "observedGeneration": 1,
                "resolved": modelartifact.Resolved(
                    revision="c" * 40, manifestDigest=digest(i),
                    digestSource=anchors.DIGEST_FROM_HUB, fileCount=9, sizeBytes=SIZE,
                    resolvedTime=now, lastValidatedTime=now),
                "conditions": [wire.Condition(
                    type=reasons.RESOLVED, status=wire.TRUE, reason=reasons.RESOLVED,
                    message="resolved by the fleet's seed", lastTransitionTime=now,
                    observedGeneration=1)]}
            await registry.modelartifacts.update_status(created, namespace=namespace, name=name)

        for first in range(0, artifacts, 100):
            await asyncio.gather(*(one(i) for i in range(first, min(first + 100, artifacts))))
        for first in range(0, len(holds), 100):
            await asyncio.gather(*(node(n) for n in range(first, min(first + 100, len(holds)))))
    finally:
        await store.close()


class Fleet:
    """The processes of hollow nodes; node ``i`` lives in process ``i % processes``."""

    def __init__(self, setups: list[process.Setup]) -> None:
        self._setups = setups
        self._pipes: list[connection.Connection] = []
        self._processes: list[Any] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.pid is not None]

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        for setup in self._setups:
            ours, theirs = context.Pipe()
            worker = context.Process(target=process.run, args=(setup, theirs), daemon=True)
            worker.start()
            self._pipes.append(ours)
            self._processes.append(worker)

    def ask(self, *command: Any) -> list[Any]:
        for pipe in self._pipes:
            pipe.send(command)
        return [pipe.recv() for pipe in self._pipes]

    def ready(self) -> int:
        return sum(self.ask("ready"))

    def start_downloads(self, plan: Sequence[tuple[int, str, int, float, float]]) -> None:
        """``(node, digest, size, delay, seconds)`` each."""
        count = len(self._pipes)
        per: list[list[tuple[int, str, int, float, float]]] = [[] for _ in range(count)]
        for node, *rest in plan:
            per[node % count].append((node // count, *rest))  # type: ignore[arg-type]
        for pipe, items in zip(self._pipes, per, strict=True):
            pipe.send(("start", items))
        for pipe in self._pipes:
            pipe.recv()

    def counts(self) -> dict[str, Any]:
        total: dict[str, Any] = {}
        for part in self.ask("counts"):
            for key, value in part.items():
                if isinstance(value, list):
                    total.setdefault(key, []).extend(value)
                elif key == "rss_mib":
                    total.setdefault(key, []).append(value)
                else:
                    total[key] = total.get(key, 0) + value
        return total

    def stop(self) -> None:
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                pipe.send(("stop",))
        for pipe, worker in zip(self._pipes, self._processes, strict=True):
            with contextlib.suppress(EOFError, OSError):
                if pipe.poll(30):
                    pipe.recv()
            worker.join(10)
            if worker.is_alive():
                worker.kill()
                worker.join()


@contextlib.contextmanager
def running(setups: list[process.Setup]) -> Iterator[Fleet]:
    fleet = Fleet(setups)
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()
