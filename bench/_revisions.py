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
import json
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
MiB = 1 << 20


def serve_hub(spec_json: str) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    from tests.support import fakehub

    spec = json.loads(spec_json)
    repo = spec["repo"]

    def files(revision: dict[str, Any]) -> dict[str, fakehub.FileSpec]:
        return {path: fakehub.FileSpec(size=f["size"], lfs=f["lfs"], seed=f.get("seed"))
                for path, f in revision.items()}

    with fakehub.run_fakehub() as hub:
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


class Hub:
    def __init__(self, repo: str, revisions: list[dict[str, dict[str, Any]]]) -> None:
        spec = json.dumps({"repo": repo, "revisions": revisions})
        self.repo = repo
        self.revisions = revisions
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench._revisions", "hub", spec], cwd=REPO_ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline())
        self.endpoint: str = ready["endpoint"]
        self.commits: list[str] = ready["commits"]

    def bytes_served(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return int(json.loads(self.proc.stdout.readline())["bytes"])

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
def running_hub(repo: str, revisions: list[dict[str, dict[str, Any]]]) -> Iterator[Hub]:
    hub = Hub(repo, revisions)
    try:
        yield hub
    finally:
        hub.close()


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
    from bench import materialize_cold
    from hub import config as hub_config
    from nodeplugin.cache import layout
    from nodeplugin.materialize import download, interface

    async def run() -> None:
        config = hub_config.HubConfig(huggingface_endpoint=endpoint)
        m = download.HubMaterializer.from_config(layout.Layout(root), config,
                                                 materialize_cold.settings())
        source = interface.Source("huggingFace", repo, commit, _patterns(allow),
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
    if last.get("state") != "Published":
        raise RuntimeError(f"the materialization did not publish: {last}: {done.stderr[-2000:]}")
    return float(last["seconds"]), hub.bytes_served() - before


if __name__ == "__main__":
    if sys.argv[1] == "hub":
        serve_hub(sys.argv[2])
    elif sys.argv[1] == "drive":
        drive(*sys.argv[2:9])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
