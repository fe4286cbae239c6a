"""fleet-writes: what one NodeModelStore status write costs the API server while N hollow node
plugins watch (each its own store, by name, and every artifact), at each N in
``BENCH_FLEET_WRITES_NODES`` (default 100,1000): 400 writes of node 0's status (one entry's
downloaded bytes moved each time), the server's CPU per write. With every watcher woken by every
write the cost grows with the plugins watching; with waiters by key it should not
(docs/fleet.md, "The wake-up wall"). Writes fleet-write-growth: the cost at the largest N over the
cost at the smallest.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time

import orjson
import yaml

from bench import _apiserver, result
from bench.hollow import fleet as fleets
from bench.hollow import scenario
from openapi import resources
from openapi.kinds import nodemodelstore

WRITES = 400


def nodes() -> list[int]:
    text = os.environ.get("BENCH_FLEET_WRITES_NODES", "100,1000")
    return sorted(int(n) for n in text.split(",") if n.strip())


def cost(count: int) -> float:
    """Server CPU milliseconds per status write with ``count`` plugins watching."""
    shape = scenario.Shape(nodes=count)
    with tempfile.TemporaryDirectory(prefix="bench-fleet-writes-") as tmp, \
            scenario.server(shape, pathlib.Path(tmp)) as api, \
            fleets.running(api.prepared.setups) as fleet:
        fleet.ask("go")
        deadline = time.monotonic() + shape.start_timeout
        while fleet.ready() < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fleet did not start in {shape.start_timeout}s")
            time.sleep(1)
        server = api.servers[0]
        config = yaml.safe_load(pathlib.Path(api.prepared.setups[0].nodes[0].kubeconfig)
                                .read_text())
        token = config["users"][0]["user"]["token"]
        path = (f"/apis/{resources.GROUP_VERSION}/{resources.NODE_MODEL_STORE.plural}/"
                f"{fleets.node_name(0)}")
        with server.client(token=token) as node, server.client() as admin:
            time.sleep(5)  # the start's last writes settle
            entries = [dict(entry) for entry in nodemodelstore.models(admin.get(path).json())]
            pid = server.process.pid
            before = _apiserver.cpu_seconds(pid)
            for i in range(WRITES):
                entries[0]["downloadedBytes"] = i
                node.patch(f"{path}/status",
                           content=orjson.dumps({"status": {"models": entries}}),
                           headers={"Content-Type": "application/merge-patch+json"}
                           ).raise_for_status()
            spent = _apiserver.cpu_seconds(pid) - before
    return spent / WRITES * 1000


def main() -> None:
    found = {count: round(cost(count), 2) for count in nodes()}
    for count, each in found.items():
        print(f"fleet-writes: {count} plugins watching: {each} ms of server CPU per status write")
    small, big = min(found), max(found)
    result.report("fleet-write-growth", round(found[big] / found[small], 3), "x", 1.3,
                  higher_is_better=False,
                  params={"writes": WRITES, "ms_per_write": {str(k): v for k, v in found.items()}})


if __name__ == "__main__":
    main()
