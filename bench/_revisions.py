"""Shared by revision-delta and filter-overlap: one repository with revisions on the fixture
hub (its own process), and one node's downloader (its own process per materialization, over one
cache), so the hub's bytes for each materialization are counted exactly.

``python -m bench._revisions hub SPEC`` serves ``SPEC`` (``{"repo", "revisions": [{path:
{"size", "lfs", "seed"}}...]}``: each revision a new head commit, unchanged paths the same
bytes), prints ``{"endpoint", "commits"}``, then answers each ``stats`` line with the bytes
served for the repository so far. ``python -m bench._revisions drive ROOT ENDPOINT REPO COMMIT
DIGEST ALLOW IGNORE`` materializes one digest (patterns comma-separated) and prints
``{"state", "seconds"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from bench import materialize_cold, result
from openapi import states

FIGURES = ()
"""None of its own: its callers name the figure (revision_delta.py, filter_overlap.py)."""

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
MiB = 1 << 20


def serve_hub(spec_json: str) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    from devkit import fixturehub

    spec = json.loads(spec_json)
    repo = spec["repo"]

    def files(revision: dict[str, Any]) -> dict[str, fixturehub.FileSpec]:
        return {path: fixturehub.FileSpec(size=f["size"], lfs=f["lfs"], seed=f.get("seed"))
                for path, f in revision.items()}

    with fixturehub.run() as hub:
        first, *later = spec["revisions"]
        commits = [hub.add_repo(repo, files(first)).commit]
        for revision in later:
            commits.append(hub.add_revision(repo, files(revision)).commit)
        for commit, revision in zip(commits, spec["revisions"], strict=True):
            for path in revision:
                content = hub.content(repo, path, commit)
                _ = content.sha256, content.gitsha1  # computed before anything is timed
        print(json.dumps({"endpoint": hub.endpoint, "commits": commits}), flush=True)
        for line in sys.stdin:
            if line.strip() == "stats":
                print(json.dumps({"bytes": hub.bytes_served(repo)}), flush=True)


class Hub(materialize_cold.Hub):
    """The hub process of ``serve_hub`` (stats and closing as ``materialize_cold.Hub``)."""

    def __init__(self, repo: str, revisions: list[dict[str, dict[str, Any]]]) -> None:
        spec = json.dumps({"repo": repo, "revisions": revisions})
        self.repo = repo
        self.files = revisions[-1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench._revisions", "hub", spec], cwd=REPO_ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline())
        self.endpoint: str = ready["endpoint"]
        self.commits: list[str] = ready["commits"]


@contextlib.contextmanager
def running_hub(repo: str, revisions: list[dict[str, dict[str, Any]]]) -> Iterator[Hub]:
    hub = Hub(repo, revisions)
    try:
        yield hub
    finally:
        hub.close()


@dataclasses.dataclass(frozen=True)
class Ask:
    """One materialization of a benchmark's pair: the revision (index) and the patterns."""

    label: str
    revision: int = 0
    allow: str = ""
    ignore: str = ""


def compare(name: str, repo: str, revisions: list[dict[str, dict[str, Any]]], first: Ask,
            second: Ask, rounds: int) -> None:
    """Rounds of ``first`` from an empty cache, then ``second`` on top of it; reports the
    second's hub bytes over its size (the first's, 1.0 from a cold cache, as the baseline) and
    both times to a published tree."""
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"bench-{name}-",
                                         dir=os.environ.get("BENCH_DIR")))
    found: list[dict[str, float]] = []
    try:
        with running_hub(repo, revisions) as hub:
            asked = []
            for ask in (first, second):
                commit = hub.commits[ask.revision]
                digest, size = digest_of(hub, commit, ask.allow, ask.ignore)
                asked.append((ask, commit, digest, size))
            for index in range(rounds):
                root = work / f"cache-{index}"
                figures: dict[str, float] = {}
                for ask, commit, digest, size in asked:
                    seconds, fetched = materialize(hub, root, commit, digest, ask.allow,
                                                   ask.ignore)
                    figures[f"{ask.label}_seconds"] = seconds
                    figures[f"{ask.label}_hub_bytes"] = fetched
                    figures[f"{ask.label}_ratio"] = fetched / size
                found.append(figures)
                materialize_cold.remove(root)
    finally:
        materialize_cold.remove(work)

    def median(key: str) -> float:
        return statistics.median(r[key] for r in found)

    one, two = first.label, second.label
    params: dict[str, Any] = {"rounds": rounds, "scale": materialize_cold.scale(),
                              f"{one}_bytes": asked[0][3], f"{two}_bytes": asked[1][3]}
    for label in (one, two):
        params[f"{label}_hub_bytes"] = [int(r[f"{label}_hub_bytes"]) for r in found]
        params[f"{label}_seconds"] = [round(r[f"{label}_seconds"], 3) for r in found]
        params[f"median_{label}_seconds"] = round(median(f"{label}_seconds"), 3)
    params[f"time_ratio_{one}_over_{two}"] = [
        round(r[f"{one}_seconds"] / r[f"{two}_seconds"], 1) for r in found]
    result.report(name, median(f"{two}_ratio"), "ratio", median(f"{one}_ratio"),
                  higher_is_better=False, params=params)


def _patterns(text: str) -> tuple[str, ...]:
    return tuple(p for p in text.split(",") if p)


def digest_of(hub: Hub, commit: str, allow: str = "", ignore: str = "") -> tuple[str, int]:
    """The manifest digest of the revision under the patterns, and its size."""
    from hub import config as hub_config
    from hub import huggingface, listing

    async def run() -> tuple[str, int]:
        client = hub_config.make_client(hub_config.HubConfig(huggingface_endpoint=hub.endpoint))
        try:
            source = huggingface.HuggingFace(client, hub.endpoint)
            _, entries, digest = await listing.manifest_for(
                source, hub.repo, commit, _patterns(allow), _patterns(ignore), token=None)
            return digest, sum(e.size for e in entries)
        finally:
            await client.aclose()

    return asyncio.run(run())


def drive(root: str, endpoint: str, repo: str, commit: str, digest: str, allow: str,
          ignore: str) -> None:
    from hub import config as hub_config
    from nodeplugin.cache import layout
    from nodeplugin.materialize import download, interface
    from openapi import sources

    async def run() -> None:
        config = hub_config.HubConfig(huggingface_endpoint=endpoint)
        m = download.HubMaterializer.from_config(layout.Layout(root), config,
                                                 materialize_cold.settings())
        source = interface.Source(sources.HUGGING_FACE, repo, commit, _patterns(allow),
                                  _patterns(ignore))
        request = interface.Request(digest, source)
        started = time.monotonic()
        while True:
            p = await m.ensure(request)
            if p.state is not interface.State.DOWNLOADING:
                break
            await asyncio.sleep(0.02)
        elapsed = time.monotonic() - started
        await m.close()
        print(json.dumps({"state": p.state.value, "seconds": elapsed,
                          "reason": p.reason.value if p.reason else None}), flush=True)

    asyncio.run(run())


def materialize(hub: Hub, root: pathlib.Path, commit: str, digest: str, allow: str = "",
                ignore: str = "") -> tuple[float, int]:
    """One materialization in its own process: seconds to a published tree, and the hub's
    bytes it took."""
    before = hub.bytes_served()
    done = subprocess.run(
        [sys.executable, "-m", "bench._revisions", "drive", str(root), hub.endpoint, hub.repo,
         commit, digest, allow, ignore],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    if last.get("state") != states.PUBLISHED:
        raise RuntimeError(f"the materialization did not publish: {last}: {done.stderr[-2000:]}")
    return float(last["seconds"]), hub.bytes_served() - before


if __name__ == "__main__":
    if sys.argv[1] == "hub":
        serve_hub(sys.argv[2])
    elif sys.argv[1] == "drive":
        drive(*sys.argv[2:9])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
