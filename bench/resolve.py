"""resolve: 1,000 ModelArtifacts over 100 repositories of the fixture hub, resolved by the real
resolver (8 workers) over the in-process client and a real SQLite registry.

Phase one creates one artifact per repository (every listing cold); phase two the other 900,
each with its own patterns, on repositories already listed at their commit. Figures: artifacts
per second over all 1,000 against the cold phase's rate, and hub requests per phase-two artifact
against a cold artifact's (target: at most 2, the revision lookup and one HEAD).

Interleaved rounds: 3 rounds, each on a fresh registry, informer, resolver and listing cache
(the hub's repositories stay), so each round measures its cold phase (the baseline) and then the
rest (cold, all, cold, all ...). Reported: the medians of each side's rounds, each round's ratio.
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import tempfile
import time

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.storage import sqlite
from apiserver.wiring import inprocess
from bench import result
from controllers.resolver import controller as resolver
from controllers.resolver import hubs, passes
from controllers.runtime import client as clients
from controllers.runtime import informer
from controllers.sources import claims, secrets
from devkit import admitting, fixturehub
from hub import config as hub_config
from openapi import install, sources
from openapi.kinds import modelartifact
from timing import clock as clocks

REPOS = 100
PER_REPO = 10
FILES_PER_REPO = 40
ROUNDS = 3
WORKER = install.WORKER_USER
PATTERNS = [["*.json"], ["*.safetensors"], ["shard-0*"], ["shard-1*", "*.json"], [],
            ["*.txt"], ["shard-2*"], ["tokenizer*"], ["*"], ["shard-3*"]]


def _files(repo: int) -> dict[str, bytes | int | fixturehub.FileSpec]:
    found: dict[str, bytes | int | fixturehub.FileSpec] = {
        "config.json": b'{"repo": %d}' % repo, "tokenizer.json": b"{}", "notes.txt": b"n"}
    for i in range(FILES_PER_REPO - 3):
        found[f"shard-{i:02d}.safetensors"] = 1000 + i
    return found


async def _resolved(registry: build.Registry, count: int) -> None:
    while True:
        listed = (await registry.modelartifacts.list("bench")).items()
        done = sum(1 for a in listed if modelartifact.is_resolved(a))
        if done >= count:
            return
        await asyncio.sleep(0.05)


async def _create(registry: build.Registry, names: list[tuple[str, int, int]]) -> None:
    for start in range(0, len(names), 50):
        await asyncio.gather(*(registry.modelartifacts.create({
            "metadata": {"name": name},
            "spec": {"source": {sources.HUGGING_FACE: {"repository": f"org/repo-{repo:03d}"}},
                     **({"allowPatterns": PATTERNS[k]} if PATTERNS[k] else {})}},
            namespace="bench") for name, repo, k in names[start:start + 50]))


async def run(hub: fixturehub.Hub, directory: pathlib.Path) -> dict[str, float]:
    store = sqlite.Store(directory / "store.db")
    await store.start()
    registry = build.build(store, admission=admitting.standalone())
    clock = clocks.SystemClock()
    api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                   worker_username=WORKER)
    hub_set = hubs.Hubs(hub_config.HubConfig(huggingface_endpoint=hub.endpoint))
    artifacts = informer.Informer(api, clients.MODEL_ARTIFACTS, clock)
    running = resolver.Resolver(api, artifacts, passes.Passes(hub_set, hubs.ListingCache()),
                                hub_set, secrets.NoSecrets(), claims.AnyClaim(), clock,
                                concurrency=8)
    tasks = [asyncio.create_task(artifacts.run())]
    await artifacts.synced.wait()
    tasks.append(asyncio.create_task(running.run()))
    try:
        hub.reset_counters()
        began = time.perf_counter()
        await _create(registry, [(f"cold-{r:03d}", r, 0) for r in range(REPOS)])
        await _resolved(registry, REPOS)
        cold_seconds = time.perf_counter() - began
        cold_requests = hub.total_requests()
        hub.reset_counters()
        warm_began = time.perf_counter()
        await _create(registry, [(f"warm-{r:03d}-{k}", r, k) for r in range(REPOS)
                                 for k in range(1, PER_REPO)])
        await _resolved(registry, REPOS * PER_REPO)
        total_seconds = time.perf_counter() - began
        warm_seconds = time.perf_counter() - warm_began
        warm_requests = hub.total_requests()
    finally:
        running.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await hub_set.aclose()
        await store.close()
    warm_count = REPOS * (PER_REPO - 1)
    return {"cold_rate": REPOS / cold_seconds, "rate": REPOS * PER_REPO / total_seconds,
            "warm_rate": warm_count / warm_seconds,
            "cold_requests": cold_requests / REPOS, "warm_requests": warm_requests / warm_count}


def main() -> None:
    with fixturehub.run() as hub, tempfile.TemporaryDirectory(prefix="bench-resolve-") as d:
        for r in range(REPOS):
            hub.add_repo(f"org/repo-{r:03d}", _files(r), tree_page_size=16)
        rounds: list[dict[str, float]] = []
        for r in range(ROUNDS):
            directory = pathlib.Path(d) / f"round-{r}"
            directory.mkdir()
            rounds.append(asyncio.run(run(hub, directory)))
    figures = {k: statistics.median(f[k] for f in rounds) for k in rounds[0]}
    params = {"repositories": REPOS, "artifacts": REPOS * PER_REPO,
              "files_per_repository": FILES_PER_REPO, "tree_page_size": 16, "workers": 8,
              "rounds": ROUNDS, **{k: round(v, 3) for k, v in figures.items()},
              **{f"{k}_rounds": [round(f[k], 3) for f in rounds] for k in rounds[0]}}
    result.report("resolve", figures["rate"], "art/s", figures["cold_rate"],
                  higher_is_better=True, params=params,
                  rounds=[(f["rate"], f["cold_rate"]) for f in rounds])
    result.report("resolve-requests", figures["warm_requests"], "req/art",
                  figures["cold_requests"], higher_is_better=False,
                  params={**params, "target": 2},
                  rounds=[(f["warm_requests"], f["cold_requests"]) for f in rounds])


if __name__ == "__main__":
    main()
