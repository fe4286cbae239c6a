"""cold-swarm: N = 4 cold plugin processes asked for one digest at the same moment, no node
holding any of it, node-to-node sync on (the nodes find each other's peer ports in their
NodeModelStores and split the files, ``nodeplugin/materialize/swarm.py``), against the same N
cold nodes all from the hub (sync off).

Value: the hub's bytes with sync on / the model's size (target <= 1.25; N = 4.0 without
sharing). Baseline in the same run: the hub's bytes with sync off / the model's size. The
times until all N trees are published are reported too (sync on against off, per round and
their median ratio, in ``params``). Everything is a real process on loopback, as in
``bench/peer_fanout.py`` (the same harness, ``devkit.harness.peernodes``): the API server
behind the fixture control plane, the fixture hub over HTTPS, one ``python -m nodeplugin`` per
node, each asked through ``POST /model/prefetches`` every 50 ms until it answers
``Published``. Rounds alternate (sync on, off, on, off ...), each with fresh nodes and empty
caches. ``BENCH_SCALE`` (default 1) multiplies the model's size (about 500 MiB at 1).
``BENCH_SWARM_MODEL=one-file`` makes the model one file of that size (a single huge GGUF: the
split is by file, so one node fetches it and the others take it from that node once it is
stored; its figures go to ``cold-swarm-one-file``). Root.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import statistics
import sys
from typing import Any

from bench import materialize_cold, mount_warm, peer_fanout, result

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from devkit.harness import peernodes  # noqa: E402 - the harness of the integration tests

FIGURES = ("cold-swarm", "cold-swarm-one-file")
"""The figures this benchmark reports (BENCH_SWARM_MODEL picks one)."""

COLD = 4
ROUNDS = 3
ARTIFACT = "swarm-model"


def _round(cluster: peernodes.Cluster, hub: materialize_cold.Hub, names: list[str], *,
           peer: bool) -> dict[str, Any]:
    with peer_fanout._running(cluster, hub, names, peer=peer) as nodes:
        before = hub.bytes_served()
        times = peernodes.publish(nodes)
        served = hub.bytes_served() - before
        downloaded = [node.downloaded() for node in nodes]
    return {"seconds": max(times), "node_seconds": [round(t, 2) for t in times],
            "hub_bytes": served,
            "node_hub_bytes": [round(d.get("hub", 0)) for d in downloaded],
            "node_peer_bytes": [round(d.get("peer", 0)) for d in downloaded]}


def _model() -> tuple[str, dict[str, dict[str, Any]]]:
    files = materialize_cold.repository(materialize_cold.scale(), big=peer_fanout.BIG)
    if os.environ.get("BENCH_SWARM_MODEL", "") != "one-file":
        return "cold-swarm", files
    size = sum(f["size"] for f in files.values())
    return "cold-swarm-one-file", {"model.gguf": {"size": size, "lfs": True}}


def main() -> None:
    name, files = _model()
    total = sum(f["size"] for f in files.values())
    rounds: list[tuple[dict[str, Any], dict[str, Any]]] = []
    load_before = os.getloadavg()
    with mount_warm.workspace() as base, contextlib.ExitStack() as stack:
        hub = stack.enter_context(materialize_cold.running_hub(files, tls=True))
        digest = materialize_cold.digest_of(hub)
        names = {(r, kind): [f"{kind}-{r}-{i}" for i in range(COLD)]
                 for r in range(ROUNDS) for kind in ("swarm", "hub")}
        every = [n for group in names.values() for n in group]
        cluster = peer_fanout.cluster_for(stack, base, hub, every, ARTIFACT, digest, files)
        for r in range(ROUNDS):
            subject = _round(cluster, hub, names[(r, "swarm")], peer=True)
            baseline = _round(cluster, hub, names[(r, "hub")], peer=False)
            print(json.dumps({"round": r, "swarm": subject, "hub": baseline}), flush=True)
            rounds.append((subject, baseline))
    ratios = [(s["hub_bytes"] / total, b["hub_bytes"] / total) for s, b in rounds]
    ours = statistics.median(s for s, _ in ratios)
    theirs = statistics.median(b for _, b in ratios)
    time_ratios = [b["seconds"] / s["seconds"] for s, b in rounds]
    params = {
        "cold_nodes": COLD, "rounds": ROUNDS, "model_bytes": total, "files": len(files),
        "scale": materialize_cold.scale(),
        "swarm_hub_bytes_over_size": [round(s, 3) for s, _ in ratios],
        "hub_hub_bytes_over_size": [round(b, 3) for _, b in ratios],
        "swarm_seconds": [round(s["seconds"], 2) for s, _ in rounds],
        "hub_seconds": [round(b["seconds"], 2) for _, b in rounds],
        "swarm_node_seconds": [s["node_seconds"] for s, _ in rounds],
        "swarm_node_hub_bytes": [s["node_hub_bytes"] for s, _ in rounds],
        "swarm_node_peer_bytes": [s["node_peer_bytes"] for s, _ in rounds],
        "time_ratio_per_round": [round(t, 3) for t in time_ratios],
        "median_time_ratio": round(statistics.median(time_ratios), 3),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "target": "hub bytes / model size <= 1.25 with sync on (4.0 all from the hub); time "
                  "ratio > 1 means all four Ready sooner than all from the hub",
    }
    result.report(name, ours, "x model size", theirs, higher_is_better=False,
                  params=params, rounds=ratios)
    print(f"{name + '-time':<22} all {COLD} Ready: median "
          f"{statistics.median(s['seconds'] for s, _ in rounds):.2f} s with sync, "
          f"{statistics.median(b['seconds'] for _, b in rounds):.2f} s from the hub "
          f"(median round ratio {statistics.median(time_ratios):.2f}x)")


if __name__ == "__main__":
    main()
