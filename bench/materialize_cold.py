"""materialize-cold: a synthetic repository (2 LFS files of 1 GiB, 1 of 512 MiB, 30 small files)
from the fixture hub over loopback HTTP, from the first ``ensure`` to a published, durable tree.

Baselines measured in the same run: (a) ``huggingface_hub.snapshot_download`` of the same
repository from the same hub into a fresh directory, then fsync of its files (it checks sizes
only); (b) the machine limit: the slowest of reading the bytes over loopback, hashing them on the
available cores, and writing+fsyncing them, each measured alone with the same sizes.

All run in 2 interleaved rounds (ours, snapshot_download, aria2c, the limits' parts, then ours
again ...; a round moves the 2.5 GiB about eight times): each figure is the median of its rounds
(a limit: the median of each round's slowest part), and each round's ratios are reported.

The hub runs as its own process (``python -m bench.materialize_cold hub SPEC``) and so does the
downloader (``... drive ARGS``), so neither shares a GIL with the other or with the baselines.
``materialize_memory`` and ``resume`` reuse these helpers. ``BENCH_SCALE`` (default 1) multiplies
the large files' sizes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench import result
from openapi import sources, states

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
REPO = "bench/cold-model"
MiB = 1 << 20
GiB = 1 << 30
ROUNDS = 2


def repository(scale: float = 1.0, big: int = 1 * GiB) -> dict[str, dict[str, Any]]:
    """The benchmark repository as a JSON-able spec: path -> {size, lfs}."""
    files: dict[str, dict[str, Any]] = {
        "model-00001-of-00002.safetensors": {"size": int(big * scale), "lfs": True},
        "model-00002-of-00002.safetensors": {"size": int(big * scale), "lfs": True},
        "extra/adapter.safetensors": {"size": int(big * scale) // 2, "lfs": True},
    }
    for i in range(30):
        files[f"small/file-{i:02d}.json"] = {"size": 1000 + 997 * i, "lfs": False}
    return files


# --- the hub process ------------------------------------------------------------------------------
def serve_hub(spec_json: str) -> None:
    """Serve ``spec`` until stdin closes; print ``{"endpoint", "commit", "ca_bundle"}`` once
    digests are ready, then answer each ``stats`` line with ``{"bytes": served, "max_open": n}``.
    ``spec["tls"]`` serves HTTPS with a throwaway CA (``ca_bundle``, its PEM file)."""
    sys.path.insert(0, str(REPO_ROOT))
    from devkit import fixturehub

    spec = json.loads(spec_json)
    with fixturehub.run(tls=bool(spec.get("tls"))) as hub:
        files = {
            p: fixturehub.FileSpec(size=f["size"], lfs=f["lfs"]) for p, f in spec["files"].items()
        }
        hub.add_repo(REPO, files)
        for path in files:
            content = hub.content(REPO, path)
            _ = content.sha256, content.gitsha1  # precompute before anything is timed
        for path, rate in spec.get("rates", {}).items():
            hub.faults(REPO, path).rate = rate
        print(json.dumps({"endpoint": hub.endpoint, "commit": hub.repo(REPO).commit,
                          "ca_bundle": hub.ca_bundle}), flush=True)
        for line in sys.stdin:
            if line.strip() == "stats":
                print(json.dumps({"bytes": hub.bytes_served(REPO),
                                  "max_open": hub.max_open_downloads}), flush=True)
            elif line.strip() == "clear":
                hub.clear_faults()
                print("{}", flush=True)


class Hub:
    def __init__(self, files: dict[str, dict[str, Any]], rates: dict[str, float] | None = None,
                 *, tls: bool = False) -> None:
        spec = json.dumps({"files": files, "rates": rates or {}, "tls": tls})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.materialize_cold", "hub", spec], cwd=REPO_ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline())
        self.endpoint: str = ready["endpoint"]
        self.commit: str = ready["commit"]
        self.ca_bundle: str | None = ready["ca_bundle"]
        self.files = files

    def command(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def bytes_served(self) -> int:
        return int(self.command("stats")["bytes"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextlib.contextmanager
def running_hub(files: dict[str, dict[str, Any]], rates: dict[str, float] | None = None,
                *, tls: bool = False) -> Iterator[Hub]:
    hub = Hub(files, rates, tls=tls)
    try:
        yield hub
    finally:
        hub.close()


def digest_of(hub: Hub) -> str:
    from hub import config as hub_config
    from hub import huggingface, listing

    async def run() -> str:
        client = hub_config.make_client(hub_config.HubConfig(huggingface_endpoint=hub.endpoint,
                                                             ca_bundle=hub.ca_bundle))
        try:
            source = huggingface.HuggingFace(client, hub.endpoint)
            return (await listing.manifest_for(source, REPO, hub.commit, (), (), token=None))[2]
        finally:
            await client.aclose()

    return asyncio.run(run())


# --- the downloader process -------------------------------------------------------------------
def drive(root: str, endpoint: str, commit: str, digest: str) -> None:
    """Ask ``ensure`` until published; print progress lines and a final line with timings."""
    from hub import config as hub_config
    from nodeplugin.cache import layout
    from nodeplugin.materialize import download, interface

    async def run() -> None:
        config = hub_config.HubConfig(huggingface_endpoint=endpoint)
        m = download.HubMaterializer.from_config(layout.Layout(root), config, settings())
        request = interface.Request(digest, interface.Source(sources.HUGGING_FACE, REPO, commit))
        started = time.monotonic()
        while True:
            p = await m.ensure(request)
            if p.state is not interface.State.DOWNLOADING:
                break
            print(json.dumps({"received": p.received_bytes}), flush=True)
            await asyncio.sleep(0.05)
        elapsed = time.monotonic() - started
        await m.close()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print(json.dumps({"state": p.state.value, "reason": p.reason.value if p.reason else None,
                          "seconds": elapsed, "peak_rss_bytes": peak_rss_bytes(),
                          "cpu_seconds": usage.ru_utime + usage.ru_stime,
                          "budget_peak_bytes": m.node.budget.peak}), flush=True)

    asyncio.run(run())


def peak_rss_bytes() -> int:
    """This process's own peak RSS: ``VmHWM``, the high-water mark of its address space.

    Not ``ru_maxrss``: Linux folds the pre-``exec`` address space's peak into it, and
    ``subprocess`` starts children with vfork, so a child's ``ru_maxrss`` is at least the peak of
    the benchmark runner that started it (139 MiB after materialize-cold ran in it, more after
    the API benchmarks of a full ``make bench``), whatever the child itself uses.
    """
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def settings() -> Any:
    """Default download settings, or overrides from ``BENCH_{PART,CHECKPOINT,MEMORY}_MIB`` and
    ``BENCH_CONCURRENCY`` (for exploring the tuning; the reported runs use the defaults)."""
    import dataclasses

    from nodeplugin.materialize import download, transfer

    env = os.environ
    tuning = transfer.Tuning()
    if "BENCH_PART_MIB" in env:
        tuning = dataclasses.replace(tuning, part_bytes=int(env["BENCH_PART_MIB"]) * MiB)
    if "BENCH_CHECKPOINT_MIB" in env:
        tuning = dataclasses.replace(
            tuning, checkpoint_bytes=int(env["BENCH_CHECKPOINT_MIB"]) * MiB
        )
    base = download.Settings(tuning=tuning)
    if "BENCH_MEMORY_MIB" in env:
        base = dataclasses.replace(base, memory_bytes=int(env["BENCH_MEMORY_MIB"]) * MiB)
    if "BENCH_CONCURRENCY" in env:
        base = dataclasses.replace(base, concurrency=int(env["BENCH_CONCURRENCY"]))
    return base


class Downloader:
    def __init__(self, root: pathlib.Path, hub: Hub, digest: str,
                 prefix: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "bench.materialize_cold", "drive", str(root),
             hub.endpoint, hub.commit, digest],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
        )

    def lines(self) -> Iterator[dict[str, Any]]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):  # a profiler wrapping the process may print its own lines
                yield json.loads(line)

    def finish(self) -> dict[str, Any]:
        last: dict[str, Any] = {}
        for last in self.lines():  # noqa: B007 - the final line is the summary
            pass
        self.proc.wait()
        if last.get("state") != states.PUBLISHED:
            raise RuntimeError(f"download did not publish: {last}")
        return last

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def materialize(hub: Hub, root: pathlib.Path, digest: str) -> dict[str, Any]:
    return Downloader(root, hub, digest).finish()


# --- baselines --------------------------------------------------------------------------------
def snapshot_download_seconds(hub: Hub, directory: pathlib.Path) -> float:
    os.environ["HF_HUB_DISABLE_XET"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ.pop("HF_HUB_OFFLINE", None)
    import huggingface_hub

    started = time.monotonic()
    folder = huggingface_hub.snapshot_download(
        REPO, revision=hub.commit, endpoint=hub.endpoint, cache_dir=directory / "hf", token=False
    )
    for path in pathlib.Path(folder).rglob("*"):
        if path.is_file():
            fd = os.open(path.resolve(), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return time.monotonic() - started


def aria2_seconds(hub: Hub, directory: pathlib.Path) -> float:
    """(c) What a performance-minded user would script: ``aria2c -x 8 -s 8`` for every file from
    the same hub (the LFS redirects followed), ``sha256sum`` of each (one per core at a time),
    then ``sync`` of the files (``sync FILE...`` fsyncs them, nothing else)."""
    directory.mkdir(parents=True, exist_ok=True)
    listing = directory / "urls.txt"
    listing.write_text("".join(
        f"{hub.endpoint}/{REPO}/resolve/{hub.commit}/{path}\n  out={path}\n"
        for path in hub.files
    ))
    paths = [str(directory / "out" / path) for path in hub.files]
    cores = str(os.cpu_count() or 1)
    started = time.monotonic()
    subprocess.run(["aria2c", "-x", "8", "-s", "8", "-q", "--auto-file-renaming=false",
                    "--allow-overwrite=true", "-d", str(directory / "out"), "-i", str(listing)],
                   check=True)
    subprocess.run(["xargs", "-0", "-P", cores, "-n", "1", "sha256sum"],
                   input="\0".join(paths).encode(), check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["sync", *paths], check=True)
    return time.monotonic() - started


def loopback_seconds(hub: Hub, streams: int = 8) -> float:
    """Read every file over loopback (the big ones as parallel ranges), discarding the bytes."""
    import httpx

    part = 64 * MiB
    jobs: list[tuple[str, int, int]] = []
    for path, spec in hub.files.items():
        for start in range(0, max(1, spec["size"]), part):
            jobs.append((path, start, min(spec["size"], start + part) - 1))

    def fetch(client: httpx.Client, path: str, start: int, end: int) -> int:
        url = f"{hub.endpoint}/{REPO}/resolve/{hub.commit}/{path}"
        got = 0
        headers = {"range": f"bytes={start}-{end}"} if end >= start else {}
        with client.stream("GET", url, headers=headers) as response:
            for chunk in response.iter_raw(1 * MiB):
                got += len(chunk)
        return got

    started = time.monotonic()
    with httpx.Client(follow_redirects=True, timeout=60) as client, \
            concurrent.futures.ThreadPoolExecutor(streams) as pool:
        list(pool.map(lambda job: fetch(client, *job), jobs))
    return time.monotonic() - started


def hashing_seconds(total: int) -> float:
    """SHA-256 of ``total`` bytes spread over the available cores (hashlib releases the GIL)."""
    block = os.urandom(16 * MiB)
    cores = os.cpu_count() or 1
    share = total // cores

    def work(_: int) -> None:
        h = hashlib.sha256()
        for _ in range(share // len(block)):
            h.update(block)

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(cores) as pool:
        list(pool.map(work, range(cores)))
    return time.monotonic() - started


def write_seconds(files: dict[str, dict[str, Any]], directory: pathlib.Path) -> float:
    block = os.urandom(8 * MiB)
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for index, spec in enumerate(files.values()):
        fd = os.open(directory / f"f{index}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            left = spec["size"]
            while left > 0:
                left -= os.write(fd, block[: min(left, len(block))])
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.monotonic() - started


def remove(path: pathlib.Path) -> None:
    """Remove a work directory, published (read-only) trees included."""
    from nodeplugin.cache import fsutil

    fsutil.remove_tree(path)


def scale() -> float:
    return float(os.environ.get("BENCH_SCALE", "1"))


def _round(hub: Hub, digest: str, files: dict[str, dict[str, Any]], total: int,
           work: pathlib.Path) -> dict[str, float | None]:
    """One round: our download, then each baseline, each from a fresh directory."""
    ours = materialize(hub, work / "cache", digest)
    remove(work / "cache")
    snapshot = snapshot_download_seconds(hub, work)
    remove(work / "hf")
    aria2 = aria2_seconds(hub, work / "aria2") if shutil.which("aria2c") else None
    remove(work / "aria2")
    loopback = loopback_seconds(hub)
    loopback_curl = curl_seconds(hub)
    hashing = hashing_seconds(total)
    writing = write_seconds(files, work / "write")
    remove(work / "write")
    writing_best = best_write_seconds(files, work / "write")
    remove(work / "write")
    return {"ours": float(ours["seconds"]), "snapshot": snapshot, "aria2": aria2,
            "loopback": loopback, "loopback_curl": loopback_curl, "hashing": hashing,
            "writing": writing, "writing_best": writing_best,
            "limit": max(loopback, hashing, writing),
            "best_limit": max(loopback_curl, hashing, writing_best)}


def main() -> None:
    files = repository(scale())
    total = sum(f["size"] for f in files.values())
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-cold-", dir=os.environ.get("BENCH_DIR")))
    try:
        with running_hub(files) as hub:
            digest = digest_of(hub)
            rounds = [_round(hub, digest, files, total, work) for _ in range(ROUNDS)]

        def median(key: str) -> float:
            return statistics.median(float(r[key] or 0.0) for r in rounds)

        def each(key: str) -> list[float | None]:
            return [None if r[key] is None else round(float(r[key] or 0.0), 3) for r in rounds]

        def paired(key: str) -> list[tuple[float, float]]:
            return [(float(r["ours"] or 0.0), float(r[key] or 0.0)) for r in rounds]

        ours = median("ours")
        aria2 = median("aria2") if rounds[0]["aria2"] is not None else None
        snapshot, limit, best_limit = median("snapshot"), median("limit"), median("best_limit")
        params = {
            "total_bytes": total, "files": len(files), "scale": scale(), "rounds": ROUNDS,
            "our_seconds": round(ours, 3),
            "snapshot_download_seconds": round(snapshot, 3),
            "aria2c_sha256sum_sync_seconds": round(aria2, 3) if aria2 else None,
            "limit_loopback_seconds": round(median("loopback"), 3),
            "limit_hash_seconds": round(median("hashing"), 3),
            "limit_write_fsync_seconds": round(median("writing"), 3),
            "best_limit_loopback_curl_seconds": round(median("loopback_curl"), 3),
            "best_limit_write_seconds": round(median("writing_best"), 3),
            "our_MBps": round(total / ours / 1e6, 1),
            **{f"{key}_rounds_seconds": each(key) for key in rounds[0]},
        }
        result.report("materialize-cold", ours, "s", snapshot,
                      higher_is_better=False, params=params, rounds=paired("snapshot"))
        if aria2 is not None:
            result.report("materialize-cold-vs-aria2", ours, "s", aria2,
                          higher_is_better=False, params=params, rounds=paired("aria2"))
        else:
            print("materialize-cold-vs-aria2: aria2c is not installed (apt-get install aria2)")
        result.report("materialize-cold-vs-limit", ours, "s", limit,
                      higher_is_better=False, params=params, rounds=paired("limit"))
        result.report("materialize-cold-vs-best-limit", ours, "s", best_limit,
                      higher_is_better=False, params=params, rounds=paired("best_limit"))
    finally:
        remove(work)


def profile(pyspy: str | None) -> None:
    """Where the CPU goes during one download: per-thread CPU of the downloader and of the hub
    (``bench._cpu``), and with ``pyspy`` a py-spy raw profile of the downloader in that file."""
    from bench import _cpu

    files = repository(scale())
    total = sum(f["size"] for f in files.values())
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-prof-", dir=os.environ.get("BENCH_DIR")))
    try:
        with running_hub(files) as hub:
            digest = digest_of(hub)
            prefix: tuple[str, ...] = ()
            if pyspy:
                spy = pathlib.Path(sys.executable).with_name("py-spy")
                prefix = (str(spy), "record", "-r", "250", "--threads", "--idle", "-f", "raw",
                          "-o", pyspy, "--")
            sampler = _cpu.Sampler()
            sampler.watch(hub.proc.pid, "hub")
            sampler.start()
            down = Downloader(work / "cache", hub, digest, prefix)
            started = time.monotonic()
            watched = False
            summary: dict[str, Any] = {}
            for line in down.lines():
                summary = line
                if not watched:
                    for child in _children(down.proc.pid) or [down.proc.pid]:
                        sampler.watch(child, "downloader")
                    watched = True
            down.proc.wait()
            wall = time.monotonic() - started
            sampler.stop()
        print(json.dumps({"bytes": total, "wall_seconds": round(wall, 2),
                          "summary": summary, "cpu": sampler.report()}, indent=1))
    finally:
        remove(work)


def hub_check() -> None:
    """The fixture hub alone: every byte fetched by ``curl`` (8 at a time, 64 MiB ranges, the
    LFS redirect followed) into /dev/null, with the hub's CPU; then the same with httpx (the
    loopback limit's reader). Shows the hub can serve faster than any client here needs."""
    from bench import _cpu

    files = repository(scale())
    total = sum(f["size"] for f in files.values())
    with running_hub(files) as hub:
        figures: dict[str, Any] = {"bytes": total}
        runs: list[tuple[str, Callable[[], float]]] = [("curl", lambda: curl_seconds(hub)),
                                                       ("httpx", lambda: loopback_seconds(hub))]
        for name, run in runs:
            sampler = _cpu.Sampler()
            sampler.watch(hub.proc.pid, "hub")
            sampler.start()
            started = time.monotonic()
            run()
            seconds = time.monotonic() - started
            sampler.stop()
            cpu = sum(sampler.report()["hub"]["total"])
            figures[name] = {"seconds": round(seconds, 2), "MBps": round(total / seconds / 1e6),
                             "hub_cpu_seconds": round(cpu, 2)}
    print(json.dumps(figures, indent=1))


def curl_seconds(hub: Hub, streams: int = 8) -> float:
    """Every byte read over loopback by ``curl`` (``streams`` at a time, 64 MiB ranges, the
    LFS redirects followed) into /dev/null: the loopback limit without a Python client."""

    def curl(job: tuple[str, int, int]) -> None:
        path, start, end = job
        url = f"{hub.endpoint}/{REPO}/resolve/{hub.commit}/{path}"
        subprocess.run(["curl", "-sSfL", "-o", "/dev/null", "-r", f"{start}-{end}", url],
                       check=True)

    started = time.monotonic()
    _pool(curl, _range_jobs(hub, 64 * MiB), streams)
    return time.monotonic() - started


def best_write_seconds(files: dict[str, dict[str, Any]], directory: pathlib.Path) -> float:
    """Writing+fsyncing the files the fastest way found on this machine: all files at once,
    2 MiB writes, writeback started after each, fsync every 8 MiB and the synced pages dropped
    (``nodeplugin.materialize.pagecache``)."""
    from nodeplugin.materialize import pagecache

    block = os.urandom(2 * MiB)
    directory.mkdir(parents=True, exist_ok=True)

    def write(job: tuple[int, int]) -> None:
        index, size = job
        fd = os.open(directory / f"f{index}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            offset = synced = 0
            while offset < size:
                wrote = os.pwrite(fd, block[: min(size - offset, len(block))], offset)
                pagecache.start_writeback(fd, offset, wrote)
                offset += wrote
                if offset - synced >= 8 * MiB:
                    os.fsync(fd)
                    pagecache.drop(fd, synced, offset - synced)
                    synced = offset
            os.fsync(fd)
            pagecache.drop(fd, synced, offset - synced)
        finally:
            os.close(fd)

    jobs = [(i, spec["size"]) for i, spec in enumerate(files.values())]
    started = time.monotonic()
    _pool(write, jobs, len(jobs))
    return time.monotonic() - started


def _range_jobs(hub: Hub, part: int) -> list[tuple[str, int, int]]:
    jobs: list[tuple[str, int, int]] = []
    for path, spec in hub.files.items():
        for start in range(0, max(1, spec["size"]), part):
            jobs.append((path, start, min(spec["size"], start + part) - 1))
    return jobs


def _pool(work: Any, jobs: list[Any], streams: int = 8) -> None:
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        list(pool.map(work, jobs))


def _children(pid: int) -> list[int]:
    """The Python child of a py-spy wrapper (or nothing without one)."""
    with contextlib.suppress(OSError):
        text = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(x) for x in text.split()]
    return []


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "hubcheck":
        hub_check()
    elif len(sys.argv) >= 2 and sys.argv[1] == "profile":
        profile(sys.argv[2] if len(sys.argv) > 2 else None)
    elif len(sys.argv) >= 2 and sys.argv[1] == "hub":
        serve_hub(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "drive":
        drive(*sys.argv[2:6])
    else:
        main()
