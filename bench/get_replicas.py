"""get-replicas: GET throughput of ``--processes 2`` on SQLite vs one SQLite server (the figure),
and on etcd of two replicas and of ``--processes 2`` vs one etcd-backed server (in the params).

The same client load every time: ``h2load`` (nghttp2's C load generator, so the client costs
little CPU next to the servers) with 2 x 16 HTTP/2 connections, 4 streams each, GETting one
ModelArtifact by name for 8 s; with one server both load generators aim at it, with two each
takes one. Rounds are interleaved (each variant in turn, then again) so drifting load from
neighbours hits all alike. The figure is observed requests per second; the params keep the CPU
seconds each part used (servers, etcd, load generators), which say where the machine's two cores
went. Needs ``h2load`` (Debian: ``apt-get install nghttp2-client``).

The load generators get the benchmark's own throwaway admin token on their command line (h2load
reads headers from argv only); the server and its token live in a temporary directory.
"""

from __future__ import annotations

import contextlib
import pathlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

from bench import _apiserver, result
from devkit.harness import apiserver, etcd

SECONDS = 8
ROUNDS = 2
CONNECTIONS = 16
"""Per load generator (two of them)."""
STREAMS = 4
TARGET = f"{_apiserver.COLLECTION}/target"


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):
            total += _apiserver.cpu_seconds(pid)
    return total


def _server_pids(server: apiserver.RunningServer) -> list[int]:
    pid = server.process.pid
    children = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(int(child) for child in children)]


def _load(urls: list[str], token: str) -> tuple[float, list[subprocess.Popen[str]]]:
    """Run one h2load per URL for SECONDS; total requests per second and the processes."""
    processes = [
        subprocess.Popen(
            ["h2load", "-c", str(CONNECTIONS), "-m", str(STREAMS), "-t", "1",
             "-D", str(SECONDS), "-H", f"Authorization: Bearer {token}", url],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for url in urls
    ]
    rate = 0.0
    for process in processes:
        out, _ = process.communicate(timeout=SECONDS * 10)
        codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
        found = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", out)
        if found is None or codes is None or int(codes.group(3)) or int(codes.group(4)):
            raise RuntimeError(f"h2load failed:\n{out[-2000:]}")
        rate += float(found.group(1))
    return rate, processes


class Variant:
    def __init__(self, name: str, servers: list[apiserver.RunningServer]) -> None:
        self.name = name
        self.servers = servers
        self.requests = 0.0
        self.seconds = 0.0
        self.server_cpu = 0.0
        self.etcd_cpu = 0.0
        self.rates: list[float] = []
        """Requests per second of each round."""

    def round(self, member: etcd.Etcd, token: str) -> None:
        urls = [f"{server.url}{TARGET}" for server in self.servers]
        if len(urls) == 1:
            urls *= 2  # the same two load generators, both on the one server
        pids = [pid for server in self.servers for pid in _server_pids(server)]
        assert member.process is not None
        before, etcd_before = _cpu(pids), _cpu([member.process.pid])
        rate, _ = _load(urls, token)
        self.server_cpu += _cpu(pids) - before
        self.etcd_cpu += _cpu([member.process.pid]) - etcd_before
        self.requests += rate * SECONDS
        self.rates.append(rate)
        self.seconds += SECONDS

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def params(self) -> dict[str, Any]:
        per = 1000.0 / max(1.0, self.requests)
        return {f"{self.name}_req_s": round(self.rate),
                f"{self.name}_server_cpu_ms_per_req": round(self.server_cpu * per, 3),
                f"{self.name}_etcd_cpu_ms_per_req": round(self.etcd_cpu * per, 3)}  # fmt: skip


def _seed(server: apiserver.RunningServer) -> None:
    with server.client() as client:
        client.post(_apiserver.COLLECTION, json=_apiserver.artifact("target")).raise_for_status()


@contextlib.contextmanager
def _servers(member: etcd.Etcd, directory: pathlib.Path) -> Iterator[dict[str, Variant]]:
    quiet = ["--log-level", "WARNING"]
    args = [*apiserver.etcd_args(member.url), *quiet]
    shared = directory / "shared"
    with (
        apiserver.running(directory / "sqlite", extra_args=quiet) as s1,
        apiserver.running(directory / "sqlite-workers", extra_args=[*quiet, "--processes", "2"]
                          ) as s2,
        apiserver.running(shared, extra_args=args, log_name="a.log") as a,
        apiserver.running(shared, extra_args=args, log_name="b.log") as b,
        apiserver.running(shared, extra_args=[*args, "--processes", "2"], log_name="w.log") as w,
    ):
        for server in (s1, s2, a):
            _seed(server)
        for server in (s1, s2, a, b, w):  # every one answers before measuring
            with server.client() as client:
                client.get(TARGET).raise_for_status()
        yield {"sqlite_one": Variant("sqlite_one", [s1]),
               "sqlite_workers": Variant("sqlite_workers", [s2]),
               "one": Variant("one", [a]), "replicas": Variant("replicas", [a, b]),
               "workers": Variant("workers", [w])}  # fmt: skip


def main() -> None:
    if shutil.which("h2load") is None:
        print("get-replicas: needs h2load (apt-get install nghttp2-client); not run")
        return
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp, \
            etcd.running(pathlib.Path(tmp) / "etcd") as member, \
            _servers(member, pathlib.Path(tmp)) as variants:  # fmt: skip
        for _ in range(ROUNDS):
            for variant in variants.values():
                variant.round(member, variant.servers[0].admin_token)
        load = pathlib.Path("/proc/loadavg").read_text().split()[:3]
    one, replicas, workers = variants["one"], variants["replicas"], variants["workers"]
    s1, s2 = variants["sqlite_one"], variants["sqlite_workers"]
    params: dict[str, Any] = {
        "storage": "sqlite (figure), etcd (params)", "seconds": SECONDS * ROUNDS,
        "load_generators": 2, "connections": 2 * CONNECTIONS, "streams_per_connection": STREAMS,
        "target_ratio": 1.7, "etcd_replicas_ratio": round(replicas.rate / one.rate, 2),
        "etcd_workers_ratio": round(workers.rate / one.rate, 2),
        "loadavg_after": " ".join(load),
        **s1.params(), **s2.params(), **one.params(), **replicas.params(), **workers.params(),
    }  # fmt: skip
    result.report("get-replicas", s2.rate, "req/s", s1.rate, higher_is_better=True,
                  params=params, rounds=list(zip(s2.rates, s1.rates, strict=True)))
    print(f"  etcd: two replicas {replicas.rate:.0f} req/s ({replicas.rate / one.rate:.2f}x), "
          f"--processes 2 {workers.rate:.0f} req/s ({workers.rate / one.rate:.2f}x) "
          f"of one ({one.rate:.0f} req/s)")


if __name__ == "__main__":
    main()
