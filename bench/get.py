"""get: GET one ModelArtifact by name with 50 concurrent keep-alive HTTP/2 clients; baseline: GET
/healthz on the same server (the stack's floor). Shortened to 10 s per figure on shared machines,
taken as two interleaved 5 s rounds each so drifting load from neighbours hits both alike.

On a 2-core machine the Python clients saturate before the server does, so the observed req/s
mostly measures the client. The reported figure is therefore the server's capacity: requests per
second of server CPU (from /proc), which does not depend on how fast the clients are; the observed
rates and latencies are kept in the params.
"""

from __future__ import annotations

import asyncio

from bench import _apiserver, result
from tests.support import apiserver

CLIENTS = 50
SECONDS = 10.0
ROUNDS = 2


async def _measure(
    server: apiserver.RunningServer, path: str, seconds: float, into: _apiserver.Totals
) -> None:
    clients = [_apiserver.client(server) for _ in range(CLIENTS)]
    try:
        senders = [lambda _, c=c: c.get(path) for c in clients]
        await _apiserver.measure_gets(server.process.pid, senders, seconds, into, path)
    finally:
        for c in clients:
            await c.aclose()


async def _run(server: apiserver.RunningServer, storage: str) -> None:
    async with _apiserver.client(server) as c:
        (await c.post(_apiserver.COLLECTION, json=_apiserver.artifact("target"))).raise_for_status()
    paths = {"floor": "/healthz", "get": f"{_apiserver.COLLECTION}/target"}
    totals = {name: _apiserver.Totals() for name in paths}
    for _ in range(ROUNDS):
        for name, path in paths.items():
            await _measure(server, path, SECONDS / ROUNDS, totals[name])
    floor, get = totals["floor"], totals["get"]
    result.report(
        _apiserver.name("get", storage), get.capacity, "req/cpu-s", floor.capacity,
        higher_is_better=True,
        params={
            "storage": storage, "clients": CLIENTS, "seconds": SECONDS, "http": "2",
            "target_ratio": 0.5,
            "observed_req_s": round(get.observed), "healthz_observed_req_s":
            round(floor.observed),
            "p99_ms": round(_apiserver.percentile(get.latencies, 0.99) * 1000, 2),
            "healthz_p99_ms": round(_apiserver.percentile(floor.latencies, 0.99) * 1000, 2),
        },
    )  # fmt: skip
    print(f"  observed: {get.observed:.0f} req/s vs /healthz {floor.observed:.0f} req/s")


def main() -> None:
    for storage in _apiserver.storages():
        with _apiserver.running(storage=storage) as server:
            asyncio.run(_run(server, storage))


if __name__ == "__main__":
    main()
