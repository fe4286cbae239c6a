"""get: GET one ModelArtifact by name on the standalone server with its default flags, against
GET /healthz on the same server (the stack's floor: TLS, HTTP/2, routing, no authentication,
no storage), in interleaved rounds (get, healthz, get, healthz ...) so drifting load from
neighbours hits both alike.

The load generator is ``h2load`` (nghttp2's C client, 50 connections x 10 streams, the admin's
bearer token), so the client costs little CPU next to the server; the figure is the server's
CPU per GET in milliseconds (from /proc), which does not depend on how fast the client is, and
the observed requests per second are ``get-throughput`` (against /healthz's, and against the rate
measured before the read-path work, kept as a parameter). Without
``h2load`` (``apt-get install nghttp2-client``) 50 Python HTTP/2 clients stand in, and the
observed rate then mostly measures them. Targets (issue 24): <= 0.35 ms per GET, and twice the
throughput measured before that work (1,073-1,184 req/s on SQLite, this machine kind).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess

from bench import _apiserver, result
from devkit.harness import apiserver

CLIENTS = 50
STREAMS = 10
SECONDS = 12.0
ROUNDS = 3
BEFORE_REQ_S = 1_128  # the middle of issue 24's 1,073-1,184 req/s, for the throughput target


def _h2load(server: apiserver.RunningServer, path: str, seconds: float) -> int:
    """Requests h2load completed against ``path`` in ``seconds`` (every one a 2xx)."""
    out = subprocess.run(
        ["h2load", "-c", str(CLIENTS), "-m", str(STREAMS), "-t", "1",
         "-D", str(max(1, round(seconds))),
         "-H", f"Authorization: Bearer {server.admin_token}", server.url + path],
        capture_output=True, text=True, timeout=seconds * 10, check=False,
    ).stdout
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done", out)
    if codes is None or done is None or any(int(codes.group(i)) for i in (2, 3, 4)):
        raise RuntimeError(f"h2load against {path} failed:\n{out[-2000:]}")
    return int(codes.group(1))


async def _measure(server: apiserver.RunningServer, path: str, seconds: float,
                   into: _apiserver.Totals) -> None:
    if shutil.which("h2load"):
        pid = server.process.pid
        _h2load(server, path, 1.0)  # warm: connections, caches
        before = _apiserver.cpu_seconds(pid)
        started = asyncio.get_running_loop().time()
        count = await asyncio.to_thread(_h2load, server, path, seconds)
        into.add(count, asyncio.get_running_loop().time() - started,
                 _apiserver.cpu_seconds(pid) - before)
        return
    clients = [_apiserver.client(server) for _ in range(CLIENTS)]
    try:
        senders = [lambda _, c=c: c.get(path) for c in clients]
        await _apiserver.measure_gets(server.process.pid, senders, seconds, into, path)
    finally:
        for c in clients:
            await c.aclose()


def _ms_per_request(totals: _apiserver.Totals) -> float:
    return totals.server_cpu * 1000 / totals.requests if totals.requests else 0.0


async def _run(server: apiserver.RunningServer, storage: str) -> None:
    async with _apiserver.client(server) as c:
        (await c.post(_apiserver.COLLECTION, json=_apiserver.artifact("target"))).raise_for_status()
    paths = {"get": f"{_apiserver.COLLECTION}/target", "floor": "/healthz"}
    totals = {name: _apiserver.Totals() for name in paths}
    for _ in range(ROUNDS):
        for name, path in paths.items():
            await _measure(server, path, SECONDS / ROUNDS, totals[name])
    get, floor = totals["get"], totals["floor"]
    client = "h2load" if shutil.which("h2load") else "python-httpx"
    per_round = [(cpu * 1000 / n, fcpu * 1000 / fn) for (n, _, cpu), (fn, _, fcpu)
                 in zip(get.rounds, floor.rounds, strict=True) if n and fn]  # fmt: skip
    result.report(
        _apiserver.name("get", storage), _ms_per_request(get), "ms cpu/req",
        _ms_per_request(floor), higher_is_better=False, rounds=per_round,
        params={
            "storage": storage, "client": client, "connections": CLIENTS, "streams": STREAMS,
            "seconds": SECONDS, "rounds": ROUNDS, "target_ms": 0.35,
            "observed_req_s": round(get.observed), "healthz_observed_req_s": round(floor.observed),
            "req_per_cpu_s": round(get.capacity),
        },
    )  # fmt: skip
    if client == "h2load":
        result.report(
            _apiserver.name("get-throughput", storage), get.observed, "req/s", floor.observed,
            higher_is_better=True,
            rounds=[(n / s, fn / fs) for (n, s, _), (fn, fs, _)
                    in zip(get.rounds, floor.rounds, strict=True) if s and fs],
            params={"storage": storage, "baseline": "GET /healthz, interleaved",
                    "before_work_req_s": BEFORE_REQ_S, "target_vs_before": 2.0,
                    "vs_before": round(get.observed / BEFORE_REQ_S, 2)},
        )  # fmt: skip
    print(f"  observed: {get.observed:.0f} req/s vs /healthz {floor.observed:.0f} req/s ({client})")


def main() -> None:
    for storage in _apiserver.storages():
        with _apiserver.running(storage=storage) as server:
            asyncio.run(_run(server, storage))


if __name__ == "__main__":
    main()
