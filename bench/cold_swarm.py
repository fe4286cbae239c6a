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
``BENCH_SWARM_MODEL=one-file`` (or ``make bench BENCH=cold-swarm-one-file``,
``bench/cold_swarm_one_file.py``) makes the model one file of that size (a single huge GGUF:
the split is by file, so one node fetches it from the hub and the others take it from that
node); its figures go to ``cold-swarm-one-file``, and its rounds run a third kind beside the
two: sync on with ``--peer-follow-fetching=false``, the others waiting for the file to be
stored before they take it, against sync on by default, where they follow it as it arrives
(``peer/growing.py``). Root.
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


STORED_ONLY = ["--peer-follow-fetching", "false"]


def _round(cluster: peernodes.Cluster, hub: materialize_cold.Hub, names: list[str], *,
           peer: bool, extra: list[str] | None = None) -> dict[str, Any]:
    with peer_fanout._running(cluster, hub, names, peer=peer, extra=extra or []) as nodes:
        before = hub.bytes_served()
        times = peernodes.publish(nodes)
        served = hub.bytes_served() - before
        downloaded = [node.downloaded() for node in nodes]
    return {"seconds": max(times), "node_seconds": [round(t, 2) for t in times],
            "hub_bytes": served,
            "node_hub_bytes": [round(d.get("hub", 0)) for d in downloaded],
            "node_peer_bytes": [round(d.get("peer", 0)) for d in downloaded]}


def _model(one_file: bool) -> tuple[str, dict[str, dict[str, Any]]]:
    files = materialize_cold.repository(materialize_cold.scale(), big=peer_fanout.BIG)
    if not one_file and os.environ.get("BENCH_SWARM_MODEL", "") != "one-file":
        return "cold-swarm", files
    size = sum(f["size"] for f in files.values())
    return "cold-swarm-one-file", {"model.gguf": {"size": size, "lfs": True}}


def main(one_file: bool = False) -> None:
    name, files = _model(one_file)
    total = sum(f["size"] for f in files.values())
    kinds = ("swarm", "hub", "stored") if name == "cold-swarm-one-file" else ("swarm", "hub")
    rounds: list[tuple[dict[str, Any], dict[str, Any]]] = []
    waited: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with mount_warm.workspace() as base, contextlib.ExitStack() as stack:
        hub = stack.enter_context(materialize_cold.running_hub(files, tls=True))
        digest = materialize_cold.digest_of(hub)
        names = {(r, kind): [f"{kind}-{r}-{i}" for i in range(COLD)]
                 for r in range(ROUNDS) for kind in kinds}
        every = [n for group in names.values() for n in group]
        cluster = peer_fanout.cluster_for(stack, base, hub, every, ARTIFACT, digest, files)
        for r in range(ROUNDS):
            subject = _round(cluster, hub, names[(r, "swarm")], peer=True)
            baseline = _round(cluster, hub, names[(r, "hub")], peer=False)
            shown: dict[str, Any] = {"round": r, "swarm": subject, "hub": baseline}
            if "stored" in kinds:
                waited.append(_round(cluster, hub, names[(r, "stored")], peer=True,
                                     extra=STORED_ONLY))
                shown["stored"] = waited[-1]
            print(json.dumps(shown), flush=True)
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
        **_waited(rounds, waited),
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


def _waited(rounds: list[tuple[dict[str, Any], dict[str, Any]]],
            waited: list[dict[str, Any]]) -> dict[str, Any]:
    """The third kind's figures (one-file: sync on, following off), against the hub's round
    and against following, round by round."""
    if not waited:
        return {}
    against_hub = [b["seconds"] / w["seconds"] for (_, b), w in zip(rounds, waited, strict=True)]
    follow_gain = [w["seconds"] / s["seconds"] for (s, _), w in zip(rounds, waited, strict=True)]
    print(f"{'stored-only-time':<22} all {COLD} Ready without following: median "
          f"{statistics.median(w['seconds'] for w in waited):.2f} s (median round ratio "
          f"against the hub {statistics.median(against_hub):.2f}x); following is "
          f"{statistics.median(follow_gain):.2f}x as fast as waiting")
    return {
        "stored_only_seconds": [round(w["seconds"], 2) for w in waited],
        "stored_only_hub_bytes": [w["hub_bytes"] for w in waited],
        "stored_only_time_ratio_per_round": [round(t, 3) for t in against_hub],
        "stored_only_median_time_ratio": round(statistics.median(against_hub), 3),
        "follow_over_stored_only_per_round": [round(t, 3) for t in follow_gain],
        "follow_over_stored_only_median": round(statistics.median(follow_gain), 3),
    }


if __name__ == "__main__":
    main()
