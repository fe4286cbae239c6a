"""get-delegated: GET one ModelArtifact through the front proxy (the front-proxy client
certificate and X-Remote-* headers, as kube-aggregator sends them) against the same GET with a
static bearer token, on one cluster-mode server in front of the fixture control plane.

- static (baseline): ``Authorization: Bearer`` from ``--token-auth-file``, a user in
  system:masters, so it costs authentication only (today's standalone path);
- warm: the front proxy's identity for a tenant RBAC allows; the SubjectAccessReview answer is
  in the cache (the same request repeats inside its 10 s);
- cold: every request names another user (same group), so every one misses the cache and waits
  for a SubjectAccessReview from the fixture control plane.

Like ``get``, the figure is requests per second of server CPU (from /proc), since on 2 cores the
Python clients saturate before the server; cold also reports its observed rate and p99, which the
review's round trip dominates. Target: warm >= 0.9x of static.
"""

from __future__ import annotations

import asyncio
import pathlib
import ssl
import tempfile

import httpx

from bench import _apiserver, result
from devkit.controlplane import ControlPlane, Rule, Subject, UserInfo
from devkit.harness import aggregator, clustermode
from openapi import resources

CLIENTS = 50
SECONDS = 12.0
ROUNDS = 3
NAMESPACE = _apiserver.NAMESPACE
PATH = f"{_apiserver.COLLECTION}/target"
STATIC_TOKEN = "bench-static-admin-token"
TENANT = UserInfo("bench-tenant", groups=("bench-readers", "system:authenticated"))

Send = _apiserver.Send


async def _measure(server: clustermode.ClusterServer, senders: list[Send], seconds: float,
                   into: _apiserver.Totals) -> None:
    await _apiserver.measure_gets(server.process.pid, senders, seconds, into, PATH)


def _static_clients(server: clustermode.ClusterServer) -> list[httpx.AsyncClient]:
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    return [httpx.AsyncClient(base_url=server.url, verify=context, http2=True, timeout=60,
                              headers={"Authorization": f"Bearer {STATIC_TOKEN}"})
            for _ in range(CLIENTS)]


async def _run(server: clustermode.ClusterServer) -> None:
    statics = _static_clients(server)
    proxies = [server.aggregator() for _ in range(CLIENTS)]
    try:
        (await statics[0].post(_apiserver.COLLECTION,
                               json=_apiserver.artifact("target"))).raise_for_status()
        same_headers = [("Accept-Encoding", "gzip"), ("User-Agent", "Go-http-client/2.0"),
                        *aggregator.identity_headers(TENANT)]
        modes: dict[str, list[Send]] = {
            "static": [lambda i, c=c: c.get(PATH) for c in statics],
            # the static request carrying the front proxy's header lines too (ignored without
            # its certificate): what the HTTP/2 layer alone costs for them
            "static+headers": [lambda i, c=c: c.get(PATH, headers=same_headers)
                               for c in statics],
            "warm": [lambda i, a=a: a.get(PATH, TENANT) for a in proxies],
            "cold": [lambda i, a=a: a.get(PATH, UserInfo(f"bench-user-{i}", groups=(
                "bench-readers", "system:authenticated"))) for a in proxies],
        }  # fmt: skip
        totals = {name: _apiserver.Totals() for name in modes}
        for _ in range(ROUNDS):  # interleaved, so drifting load hits every mode alike
            for name, senders in modes.items():
                await _measure(server, senders, SECONDS / ROUNDS, totals[name])
    finally:
        for client in statics:
            await client.aclose()
        for proxy in proxies:
            await proxy.aclose()
    static, warm, cold = totals["static"], totals["warm"], totals["cold"]
    padded = totals["static+headers"]
    common = {"clients": CLIENTS, "seconds": SECONDS, "http": "2",
              "static_with_identity_headers_req_per_cpu_s": round(padded.capacity),
              "static_req_per_cpu_s": round(static.capacity),
              "static_observed_req_s": round(static.observed),
              "static_p99_ms": round(_apiserver.percentile(static.latencies, 0.99) * 1000, 2)}
    result.report(
        "get-delegated", warm.capacity, "req/cpu-s", static.capacity, higher_is_better=True,
        rounds=list(zip(warm.round_capacities, static.round_capacities, strict=True)),
        params={**common, "target_ratio": 0.9, "observed_req_s": round(warm.observed),
                "p99_ms": round(_apiserver.percentile(warm.latencies, 0.99) * 1000, 2)},
    )  # fmt: skip
    result.report(
        "get-delegated-cold", cold.capacity, "req/cpu-s", static.capacity,
        higher_is_better=True,
        rounds=list(zip(cold.round_capacities, static.round_capacities, strict=True)),
        params={**common, "observed_req_s": round(cold.observed),
                "p99_ms": round(_apiserver.percentile(cold.latencies, 0.99) * 1000, 2)},
    )  # fmt: skip
    print(f"  observed: static {static.observed:.0f} req/s, warm {warm.observed:.0f} req/s, "
          f"cold {cold.observed:.0f} req/s")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-delegated-") as tmp:
        base = pathlib.Path(tmp)
        with ControlPlane(base / "cp") as cp:
            clustermode.prepare(cp)
            cp.policy.grant(Subject("Group", "bench-readers"),
                            Rule(("get", "list", "watch"), (resources.GROUP,),
                                 ("modelartifacts",)), namespace=NAMESPACE)
            tokens = base / "tokens.csv"
            tokens.write_text(f'{STATIC_TOKEN},bench-admin,bench-admin,"system:masters"\n')
            with clustermode.running(cp, base / "server", extra_args=[
                    "--token-auth-file", str(tokens), "--log-level", "WARNING"]) as server:
                asyncio.run(_run(server))


if __name__ == "__main__":
    main()
