"""fleet: N hollow node plugins against one real standalone API server (SQLite, controllers
embedded), for N in ``BENCH_FLEET_NODES`` (default 100,300,1000), the scenario of
``bench/hollow/scenario.py`` (start, steady, rollout, steady, progress with 64 live nodes, a
second rollout with a tenant listing and watching; LISTs of every NodeModelStore).

``BENCH_FLEET_STORAGE=etcd`` runs the same on one real etcd with two API server replicas, each
with its controllers embedded (one leads; ``bench/hollow/backend.py``), the nodes split between
the replicas; every figure per N goes to fleet-etcd-<N>.json, with each replica's CPU and RSS and
etcd's (the growth and RSS figures below are the SQLite default's only).

``BENCH_FLEET_STORAGE=cluster`` runs one server in cluster mode behind a real kube-apiserver's
aggregation layer (``bench/hollow/cluster.py``; hold ``flock /tmp/realnode.lock``), the hollow
plugins calling kube-apiserver with Pod-bound tokens; fleet-cluster-<N>.json adds
kube-apiserver's and its etcd's CPU and RSS.

``BENCH_FLEET_SHORT=1`` runs a small shape instead (200 artifacts, 10 s phases, downloads of
3-6 s), a smoke run of the simulator in about a minute per N.

Per N it writes every figure to the results directory as fleet-<N>.json; with 100 and 1000 among
the Ns, the figures fleet-cpu-growth (API server CPU per node at 1,000 over the same at 100, in
the phase where it grows most of steady, rollout, steady-after and rollout-tenant; every phase's
ratio in its params) and fleet-rss-mib (the server's RSS at 1,000 nodes).
"""

from __future__ import annotations

import json
import os

from bench import result
from bench.hollow import cluster as clusters
from bench.hollow import scenario

DEFAULT_NODES = (100, 300, 1000)


def nodes() -> list[int]:
    text = os.environ.get("BENCH_FLEET_NODES", "")
    return [int(n) for n in text.split(",") if n.strip()] if text else list(DEFAULT_NODES)


def mode() -> str:
    storage = os.environ.get("BENCH_FLEET_STORAGE", "sqlite")
    if storage not in ("sqlite", "etcd", "cluster"):
        raise SystemExit(f"BENCH_FLEET_STORAGE={storage!r}: sqlite, etcd or cluster")
    return storage


def replicas() -> int:
    return 2 if mode() == "etcd" else 0


def shape(count: int) -> scenario.Shape:
    if os.environ.get("BENCH_FLEET_SHORT"):
        return scenario.Shape(nodes=count, artifacts=200, namespaces=5, steady=10.0,
                              rollout_window=5.0, download=(3.0, 6.0), progress_requests=10,
                              list_requests=3, processes=2, replicas=replicas(),
                              cluster=mode() == "cluster")
    return scenario.Shape(nodes=count, replicas=replicas(), cluster=mode() == "cluster")


def per_node(found: dict[str, object], phase: str) -> float:
    phases = found["phases"]
    assert isinstance(phases, dict)
    return float(phases[phase]["server_cpu_ms_per_node_min"])


def main() -> None:
    if mode() == "cluster" and clusters.missing():
        print(f"fleet (cluster mode): needs {', '.join(clusters.missing())}; not run")
        return
    runs: dict[int, dict[str, object]] = {}
    prefix = "fleet" if mode() == "sqlite" else f"fleet-{mode()}"
    for count in nodes():
        found = scenario.run(shape(count))
        runs[count] = found
        result.RESULTS.mkdir(parents=True, exist_ok=True)
        (result.RESULTS / f"{prefix}-{count}.json").write_text(json.dumps(found, indent=2) + "\n")
        print(json.dumps(found, indent=2))
    if 100 in runs and 1000 in runs and mode() == "sqlite":
        small, big = runs[100], runs[1000]
        growth = {phase: round(per_node(big, phase) / per_node(small, phase), 3)
                  for phase in ("steady", "rollout", "steady-after", "rollout-tenant")}
        worst = max(growth, key=lambda phase: growth[phase])
        result.report("fleet-cpu-growth", growth[worst], "x", 1.3, higher_is_better=False,
                      params={"phase": worst, "per_phase": growth,
                              "per_node_ms_per_min_100": per_node(small, worst),
                              "per_node_ms_per_min_1000": per_node(big, worst)})
        phases = big["phases"]
        assert isinstance(phases, dict)
        rss = max(float(p["server_rss_max_mib"]) for p in phases.values())
        result.report("fleet-rss-mib", rss, "MiB", 1024.0, higher_is_better=False,
                      params={"nodes": 1000})


if __name__ == "__main__":
    main()
