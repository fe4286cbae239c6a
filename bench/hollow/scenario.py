"""The fleet scenario: N hollow nodes against one standalone API server (its controllers
embedded, so the worker is that process), measured phase by phase.

The fleet is stored as running (``fleet.seed``): the start phase is the plugins (re)starting, 20 a
second, each listing and watching and writing its first status. Phases: start, steady, rollout (20%
of the nodes each start three downloads within ``rollout_window`` seconds), steady again, progress
(64 nodes downloading one artifact, its ``progress`` read), a second rollout while a tenant lists
every artifact every 5 s and watches them, and a third while a client reads some rolled-out
artifacts' ``status.nodes`` (the status-write-to-count latency); then LISTs of every
NodeModelStore. Throughout, one artifact a second is touched (an annotation with the wall time), so
every watcher's lag is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import random
import tempfile
import time
from collections.abc import Coroutine, Iterator
from typing import Any

import httpx

from apiserver.storage import interface
from bench import _apiserver
from bench.hollow import backend as backends
from bench.hollow import cluster as clusters
from bench.hollow import fleet as fleets
from bench.hollow import observe

PROGRESS_NODES = 64
COUNTED_MODELS = 10
"""The rolled-out models whose ``status.nodes`` is read (each once a second) for the latency
from a node's status write to the count a client reads."""


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    nodes: int
    artifacts: int = 2000
    namespaces: int = 50
    held: int = 16
    """Digests each node holds at start."""
    processes: int = 4
    steady: float = 30.0
    rollout_window: float = 60.0
    download: tuple[float, float] = (30.0, 60.0)
    rollout_share: float = 0.2
    per_node: int = 3
    rollout_models: int = 10
    progress_requests: int = 100
    list_requests: int = 10
    start_timeout: float = 900.0
    replicas: int = 0
    """0: one server on SQLite; else that many servers on one etcd (``backend``)."""
    cluster: bool = False
    """One server on SQLite in cluster mode behind a real kube-apiserver (``cluster``)."""


@dataclasses.dataclass
class Phase:
    name: str
    seconds: float = 0.0
    server_cpu: float = 0.0
    """Summed over the replicas."""
    replica_cpu: list[float] = dataclasses.field(default_factory=list)
    replica_rss_mib: list[float] = dataclasses.field(default_factory=list)
    others_cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    others_rss_mib: dict[str, float] = dataclasses.field(default_factory=dict)
    """etcd's, kube-apiserver's (``backend.Backend.others``)."""
    fleet_cpu: float = 0.0
    rss_max_mib: float = 0.0
    writes: dict[str, float] = dataclasses.field(default_factory=dict)
    counts: dict[str, Any] = dataclasses.field(default_factory=dict)
    aggregated: int = 0
    """Artifact writes seen besides the touches (the aggregation's, when it stored
    ``status.nodes``; none since the counts are computed when read)."""

    def figures(self, nodes: int) -> dict[str, Any]:
        counts = self.counts
        lags = counts.get("lags") or [0.0]
        events = counts.get("artifact_events", 0) + counts.get("store_events", 0)
        return {
            "seconds": round(self.seconds, 1),
            "server_cpu_s_per_min": round(self.server_cpu / self.seconds * 60, 2),
            "server_cpu_ms_per_node_min": round(self.server_cpu / self.seconds * 60 / nodes
                                                * 1000, 2),
            "server_rss_max_mib": round(self.rss_max_mib, 1),
            "replica_cpu_s_per_min": [round(c / self.seconds * 60, 2) for c in self.replica_cpu],
            "replica_rss_max_mib": [round(r, 1) for r in self.replica_rss_mib],
            **{f"{name}_cpu_s_per_min": round(cpu / self.seconds * 60, 2)
               for name, cpu in self.others_cpu.items()},
            **{f"{name}_rss_max_mib": round(rss, 1) for name, rss in self.others_rss_mib.items()},
            "fleet_cpu_s_per_min": round(self.fleet_cpu / self.seconds * 60, 2),
            "writes_per_s": {k: round(v / self.seconds, 2) for k, v in sorted(
                self.writes.items()) if v},
            "watch_events_per_s": round(events / self.seconds, 1),
            "artifact_events_per_s": round(counts.get("artifact_events", 0) / self.seconds, 1),
            "store_events_per_s": round(counts.get("store_events", 0) / self.seconds, 1),
            "slowest_watcher_lag_s": round(max(lags), 3),
            "lag_p99_s": round(_apiserver.percentile(lags, 0.99), 3),
            "status_writes": counts.get("writes", 0),
            "progress_writes": counts.get("progress_writes", 0),
            "relists": counts.get("relists", 0),
            "aggregated_status_writes_per_s": round(self.aggregated / self.seconds, 2),
        }


def holds(shape: Shape) -> list[list[int]]:
    rollout = set(range(shape.rollout_models + 1))  # the rolled-out models and the progress one
    pool = [i for i in range(shape.artifacts) if i not in rollout]
    return [[pool[(n * shape.held + j) % len(pool)] for j in range(shape.held)]
            for n in range(shape.nodes)]


def _rollout(shape: Shape, rng: random.Random, first_model: int
             ) -> list[tuple[int, str, int, float, float]]:
    nodes = rng.sample(range(shape.nodes), max(1, int(shape.nodes * shape.rollout_share)))
    plan = []
    for n in nodes:
        for j in range(shape.per_node):
            model = first_model + (n + j) % shape.rollout_models
            plan.append((n, fleets.digest(model), fleets.SIZE,
                         rng.uniform(0, shape.rollout_window), rng.uniform(*shape.download)))
    return plan


@contextlib.contextmanager
def server(shape: Shape, base: pathlib.Path) -> Iterator[backends.Backend]:
    """The API side (``backend``) with the fleet seeded: one SQLite server, or
    ``shape.replicas`` servers on one etcd."""
    held = holds(shape)
    args = ["--log-level", "WARNING", "--controllers=embedded", "--huggingface-endpoint",
            "https://127.0.0.1:9", "--modelscope-endpoint", "https://127.0.0.1:9"]

    def seed(store: interface.Store) -> Coroutine[Any, Any, None]:
        return fleets.seed(store, shape.artifacts, shape.namespaces, held)

    if shape.cluster:
        with clusters.running(base, held, shape.processes, args, seed) as found:
            yield found
        return
    prepared = fleets.prepare(base, shape.nodes, held, shape.processes,
                              replicas=max(1, shape.replicas))
    args += ["--plugin-ca-file", str(prepared.plugin_ca), *prepared.node_args]
    with backends.running(prepared, base, shape.replicas, args, seed) as found:
        yield found


def run(shape: Shape) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp, \
            server(shape, pathlib.Path(tmp)) as api, \
            fleets.running(api.prepared.setups) as fleet:
        found = asyncio.run(_scenario(shape, api, fleet))
        found["leader_replica"] = api.leader()
        return found


def _cpu(pids: list[int]) -> list[float]:
    return [_apiserver.cpu_seconds(pid) for pid in pids]


async def _writes(clients: list[httpx.AsyncClient]) -> dict[str, float]:
    """Writes by kind, summed over the replicas' ``/metrics``."""
    total: dict[str, float] = {}
    for client in clients:
        for key, value in (await observe.writes_by_kind(client)).items():
            total[key] = total.get(key, 0.0) + value
    return total


async def _scenario(shape: Shape, api: backends.Backend,
                    fleet: fleets.Fleet) -> dict[str, Any]:
    pids, others = api.pids, api.others
    rng = random.Random(41)
    sampler = observe.Sampler(pids + list(others.values()))
    keys = [fleets.artifact_key(i, shape.namespaces) for i in range(shape.artifacts)]
    artifact_events = observe.ArtifactEvents()
    aggregates = observe.Aggregates(keys[:min(COUNTED_MODELS, shape.rollout_models)])
    toucher = observe.Toucher(keys[shape.rollout_models + 1:])
    phases: list[Phase] = []
    result: dict[str, Any] = {"nodes": shape.nodes, "artifacts": shape.artifacts,
                              "namespaces": shape.namespaces, "held_per_node": shape.held,
                              "storage": "etcd" if shape.replicas else "sqlite",
                              "replicas": max(1, shape.replicas),
                              "mode": "cluster" if shape.cluster else "standalone"}
    server = api.servers[0]
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(observe.admin(server))
        watcher = await stack.enter_async_context(observe.admin(server))
        metrics = [await stack.enter_async_context(observe.admin(one)) for one in api.metrics]
        tasks = [asyncio.create_task(sampler.run()),
                 asyncio.create_task(artifact_events.run(watcher))]
        loop = asyncio.get_running_loop()

        async def phase(name: str, body: Any) -> Phase:
            found = Phase(name)
            sampler.clear()
            writes = await _writes(metrics)
            cpu = _cpu(pids)
            others_cpu = dict(zip(others, _cpu(list(others.values())), strict=True))
            fleet_cpu = sum(_cpu(fleet.pids))
            await loop.run_in_executor(None, fleet.counts)  # counts start afresh
            seen, touched = artifact_events.events, toucher.touches
            began = time.monotonic()
            await body()
            found.seconds = time.monotonic() - began
            found.replica_cpu = [b - a for a, b in zip(cpu, _cpu(pids), strict=True)]
            found.server_cpu = sum(found.replica_cpu)
            found.fleet_cpu = sum(_cpu(fleet.pids)) - fleet_cpu
            found.replica_rss_mib = [sampler.peak(pid) for pid in pids]
            found.rss_max_mib = sum(found.replica_rss_mib)
            for name, pid in others.items():
                found.others_cpu[name] = _cpu([pid])[0] - others_cpu[name]
                found.others_rss_mib[name] = sampler.peak(pid)
            after = await _writes(metrics)
            found.writes = {k: v - writes.get(k, 0.0) for k, v in after.items()}
            found.counts = await loop.run_in_executor(None, fleet.counts)
            found.aggregated = artifact_events.events - seen - (toucher.touches - touched)
            phases.append(found)
            return found

        async def start() -> None:
            await loop.run_in_executor(None, fleet.ask, "go")
            deadline = time.monotonic() + shape.start_timeout
            while await loop.run_in_executor(None, fleet.ready) < shape.nodes:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the fleet did not start in {shape.start_timeout}s")
                await asyncio.sleep(1)

        async def settle() -> None:
            await asyncio.sleep(shape.steady)

        async def rollout(first_model: int) -> None:
            await loop.run_in_executor(None, fleet.start_downloads,
                                       _rollout(shape, rng, first_model))
            await asyncio.sleep(shape.rollout_window + shape.download[1] + 10)

        await phase("start", start)
        tasks.append(asyncio.create_task(toucher.run(client)))
        await phase("steady", settle)
        await phase("rollout", lambda: rollout(0))
        await phase("steady-after", settle)

        # progress: 64 nodes (or every node) downloading one model slowly
        hot = shape.rollout_models
        live_nodes = min(PROGRESS_NODES, shape.nodes)
        path = f"{observe.GROUP}/namespaces/{keys[hot][0]}/modelartifacts/{keys[hot][1]}/progress"
        await loop.run_in_executor(None, fleet.start_downloads, [
            (n, fleets.digest(hot), fleets.SIZE, 0.0, 3600.0) for n in range(live_nodes)])
        progress_latencies: list[float] = []
        live = 0

        async def read_progress() -> None:
            nonlocal progress_latencies, live
            await asyncio.sleep(10)
            progress_latencies, live = await observe.progress(client, path,
                                                              shape.progress_requests)

        await phase("progress", read_progress)

        # second rollout (the same models again on other nodes) with a tenant
        tenant = observe.Tenant()

        async def rollout_beside(beside: Coroutine[Any, Any, None]) -> None:
            """A rollout while ``beside`` runs; it is stopped when the rollout ends."""
            running = asyncio.create_task(beside)
            try:
                await rollout(0)
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)

        await phase("rollout-tenant", lambda: rollout_beside(tenant.run(client)))

        # a third rollout while a client reads the counted models' status.nodes once a second
        # each (its reads cost the server about a second of CPU a minute, so the phases above,
        # whose CPU is compared across N, run without them)
        await aggregates.read_each(client)
        ready_before = {fleets.digest(k): aggregates.ready_now(fleets.digest(k))
                        for k in range(shape.rollout_models)}

        third = await phase("rollout-counted", lambda: rollout_beside(aggregates.run(client)))
        pooled = aggregates.latencies(third.counts.get("published", []), ready_before)
        list_latencies, list_size = await observe.list_stores(client, shape.list_requests)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    result["phases"] = {p.name: p.figures(shape.nodes) for p in phases}
    result["aggregate_latency_s"] = {
        "samples": len(pooled),
        "p50": round(_apiserver.percentile(pooled, 0.5), 3),
        "p99": round(_apiserver.percentile(pooled, 0.99), 3),
    }
    result["progress"] = {"live": live, "nodes_downloading": live_nodes,
                          "p50_ms": round(_apiserver.percentile(progress_latencies, 0.5) * 1000, 1),
                          "p99_ms": round(_apiserver.percentile(progress_latencies, 0.99) * 1000,
                                          1)}
    result["list_nodemodelstores"] = {"bytes": list_size,
                                      "p50_ms": round(_apiserver.percentile(list_latencies, 0.5)
                                                      * 1000, 1)}
    result["tenant"] = {"lists": len(tenant.lists),
                        "list_p50_ms": round(_apiserver.percentile(tenant.lists, 0.5) * 1000, 1),
                        "watch_lag_max_s": round(max(tenant.lags, default=0.0), 3)}
    result["artifact_events_seen"] = artifact_events.events
    result["aggregate_reads"] = aggregates.reads
    result["fleet_rss_mib"] = phases[-1].counts.get("rss_mib", [])
    return result
