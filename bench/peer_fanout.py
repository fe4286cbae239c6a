"""peer-fanout: one seed node and N cold nodes (N = 4) take one artifact at once, the cold nodes
pulling from their peers (node-to-node sync on), against the same N cold nodes all from the hub
(sync off). The figures: the fan-out time (the moment the asked nodes all hold a published tree)
against all-from-hub, as a ratio, and the hub bytes served per extra node (target 0).

Root: each plugin's read-only view of its cache is a bind mount. Everything is a real process
on loopback, as in a cluster (``devkit.harness.peernodes``, the harness the integration tests of
node-to-node sync use): the API server in cluster mode behind the fixture control plane (which
authenticates, authorizes with the chart's rendered RBAC, proxies ``/apis/worker.gpustack.ai``
as kube-aggregator does, and answers the plugins' TokenReviews: the standalone server serves
none, and the peer port admits only a reviewed token); the fixture hub
(``bench.materialize_cold``'s hub process); one
``python -m nodeplugin`` per node, each with its own Pod-bound token and, with sync on,
``--peer-port`` and a token for the peer audience. The plugins find each other as in a cluster:
each publishes ``status.peer.url`` in its NodeModelStore and the cold ones list the stores (no
``--peer-address``). Each node is asked as the worker asks it in standalone mode (``POST
/model/prefetches`` on its HTTPS port, the worker's token), again every 50 ms until it answers
``Published``: the node cache's ordinary path (download, verify, publish), the one a mount
takes. The params keep the CPU seconds of the serving side (the seed with sync on, the hub
process with it off) and of the cold plugins in each round.

The seed is warmed from the hub once, before the rounds. Each round starts N fresh cold plugins
(new node names, empty caches; not timed: until ``/readyz`` and their store is Ready), asks them
all at once and times until the last one publishes, then stops them. Rounds alternate (sync on,
sync off, on, off ...) so a noisy neighbour on this shared machine hits both alike.
``BENCH_SCALE`` (default 1) multiplies the model's size (about 500 MiB at 1). The hub speaks
HTTPS, as a real one does and as the peer ports do (its CA in a ConfigMap the stores' spec
names, ``spec.hub.caBundleConfigMap``), so both sides pay for TLS; ``BENCH_HUB_TLS=0`` serves it
over plain HTTP instead (cheaper for the all-from-hub side).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pathlib
import statistics
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from bench import _apiserver, materialize_cold, mount_warm, result
from openapi import states

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from devkit.harness import peernodes  # noqa: E402 - the harness of the integration tests

COLD = 4
ROUNDS = 3
MiB = 1 << 20
BIG = 200 * MiB
"""The two large files' size at scale 1 (plus one half as large and 30 small ones)."""
ARTIFACT = "peer-model"
HUB_CA = "hub-ca"


def cluster_for(stack: contextlib.ExitStack, base: pathlib.Path, hub: materialize_cold.Hub,
                nodes: list[str], artifact: str, digest: str, files: dict[str, dict[str, Any]]
                ) -> peernodes.Cluster:
    """The API server and control plane for ``nodes``, their stores' spec naming ``hub`` (and
    its CA), and ``artifact`` resolved to ``digest``."""
    spec: dict[str, Any] = {"hub": {"huggingFaceEndpoint": hub.endpoint}}
    if hub.ca_bundle:
        spec["hub"]["caBundleConfigMap"] = HUB_CA
    cluster = peernodes.Cluster(stack, base, {node: spec for node in nodes})
    if hub.ca_bundle:
        cluster.hub_ca(HUB_CA, pathlib.Path(hub.ca_bundle).read_text())
    cluster.resolve(artifact, materialize_cold.REPO, revision=hub.commit, digest=digest,
                    file_count=len(files), size=sum(f["size"] for f in files.values()))
    return cluster


def _start(cluster: peernodes.Cluster, hub: materialize_cold.Hub, names: list[str],
           nodes: list[peernodes.Node], *, peer: bool, extra: Sequence[str] = ()) -> None:
    """Start a plugin for each name into ``nodes`` (each kept there as soon as its process
    runs, so the caller stops every one even when another never serves) and wait for all."""
    for name in names:
        nodes.append(peernodes.Node(cluster, name, hub.endpoint, peer=peer,
                                    extra_args=["--log-level", "WARNING", *extra]))
    with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
        list(pool.map(lambda n: n.wait_serving(), nodes))


@contextlib.contextmanager
def _running(cluster: peernodes.Cluster, hub: materialize_cold.Hub, names: list[str], *,
             peer: bool, extra: Sequence[str] = ()) -> Iterator[list[peernodes.Node]]:
    nodes: list[peernodes.Node] = []
    try:
        _start(cluster, hub, names, nodes, peer=peer, extra=extra)
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def _round(cluster: peernodes.Cluster, hub: materialize_cold.Hub, seed: peernodes.Node,
           names: list[str], *, peer: bool) -> dict[str, Any]:
    with _running(cluster, hub, names, peer=peer) as nodes:
        before = hub.bytes_served()
        pids = [hub.proc.pid, seed.process.pid, *(n.process.pid for n in nodes)]
        cpu = [_apiserver.cpu_seconds(pid) for pid in pids]
        times = peernodes.publish(nodes)
        served = hub.bytes_served() - before
        used = [_apiserver.cpu_seconds(pid) - c for pid, c in zip(pids, cpu, strict=True)]
        sources = sorted({node.source() for node in nodes})
        if peer:
            _tell_fallbacks(nodes)
    return {"seconds": max(times), "node_seconds": [round(t, 2) for t in times],
            "hub_bytes": served, "sources": sources, "hub_cpu_seconds": round(used[0], 2),
            "seed_cpu_seconds": round(used[1], 2), "cold_cpu_seconds": round(sum(used[2:]), 2)}


def _tell_fallbacks(nodes: list[peernodes.Node]) -> None:
    """A cold node that took hub bytes with sync on gave its peer up: print why (its log's
    warnings) before its directory goes."""
    for node in nodes:
        from_hub = node.downloaded().get("hub", 0)
        if from_hub:
            said = [line for line in node.log().splitlines() if "WARNING" in line
                    or "ERROR" in line]
            print(f"{node.name} took {from_hub:.0f} B from the hub:", *said[-20:], sep="\n  ",
                  file=sys.stderr, flush=True)


def main() -> None:
    files = materialize_cold.repository(materialize_cold.scale(), big=BIG)
    total = sum(f["size"] for f in files.values())
    rounds: list[tuple[dict[str, Any], dict[str, Any]]] = []
    load_before = os.getloadavg()
    with mount_warm.workspace() as base, contextlib.ExitStack() as stack:
        tls = os.environ.get("BENCH_HUB_TLS", "1") != "0"
        hub = stack.enter_context(materialize_cold.running_hub(files, tls=tls))
        digest = materialize_cold.digest_of(hub)
        names = {(r, kind): [f"{kind}-{r}-{i}" for i in range(COLD)]
                 for r in range(ROUNDS) for kind in ("peer", "hub")}
        every = ["seed", *(n for group in names.values() for n in group)]
        cluster = cluster_for(stack, base, hub, every, ARTIFACT, digest, files)
        seed = peernodes.Node(cluster, "seed", hub.endpoint, peer=True,
                              extra_args=["--log-level", "WARNING"])
        stack.callback(seed.stop)
        seed.wait_serving()
        before = hub.bytes_served()
        seed_seconds = peernodes.publish([seed])[0]
        seed_hub_bytes = hub.bytes_served() - before
        if seed.source() != states.HUB:  # the cold nodes find the seed by its store's listing
            raise RuntimeError("the seed's store does not list the digest Ready")
        for r in range(ROUNDS):
            subject = _round(cluster, hub, seed, names[(r, "peer")], peer=True)
            baseline = _round(cluster, hub, seed, names[(r, "hub")], peer=False)
            print(json.dumps({"round": r, "peer": subject, "hub": baseline}), flush=True)
            rounds.append((subject, baseline))
    ours = statistics.median(s["seconds"] for s, _ in rounds)
    theirs = statistics.median(b["seconds"] for _, b in rounds)
    extra = [s["hub_bytes"] / COLD for s, _ in rounds]
    params = {
        "cold_nodes": COLD, "rounds": ROUNDS, "model_bytes": total, "files": len(files),
        "scale": materialize_cold.scale(), "hub_tls": bool(hub.ca_bundle),
        "seed_seconds": round(seed_seconds, 2), "seed_hub_bytes": seed_hub_bytes,
        "peer_seconds": [round(s["seconds"], 2) for s, _ in rounds],
        "hub_seconds": [round(b["seconds"], 2) for _, b in rounds],
        "peer_node_seconds": [s["node_seconds"] for s, _ in rounds],
        "hub_node_seconds": [b["node_seconds"] for _, b in rounds],
        "peer_seed_cpu_seconds": [s["seed_cpu_seconds"] for s, _ in rounds],
        "peer_cold_cpu_seconds": [s["cold_cpu_seconds"] for s, _ in rounds],
        "hub_cold_cpu_seconds": [b["cold_cpu_seconds"] for _, b in rounds],
        "hub_hub_cpu_seconds": [b["hub_cpu_seconds"] for _, b in rounds],
        "peer_hub_bytes_per_extra_node": extra,
        "hub_hub_bytes_per_node": [b["hub_bytes"] / COLD for _, b in rounds],
        "peer_sources": sorted({x for s, _ in rounds for x in s["sources"]}),
        "hub_sources": sorted({x for _, b in rounds for x in b["sources"]}),
        "peer_MBps": round(COLD * total / ours / 1e6, 1),
        "hub_MBps": round(COLD * total / theirs / 1e6, 1),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "target": "hub bytes per extra node 0; the fan-out time reported against all-from-hub",
    }
    result.report("peer-fanout", ours, "s", theirs, higher_is_better=False, params=params,
                  rounds=[(s["seconds"], b["seconds"]) for s, b in rounds])
    per_node = statistics.median(extra)
    all_hub = statistics.median(b["hub_bytes"] / COLD for _, b in rounds)
    print(f"{'peer-fanout-hub-bytes':<22} value={per_node:.4g} B/node   baseline={all_hub:.4g} "
          f"(all from the hub; the seed took {seed_hub_bytes} B once) target=0 "
          f"{'met' if max(extra) == 0 else 'missed'}")


if __name__ == "__main__":
    main()
