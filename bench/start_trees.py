"""start-trees: the node plugin started (as its own process) on a cache of 1,000 published trees
(12 files each, one of them in a subdirectory): the time from spawn until the socket serves, and
until every tree was checked (its stored manifest hashed to its digest, its files' names and
sizes held to the manifest: ``cache.integrity``, which runs once the socket serves and checks a
tree first when a mount comes before the pass).

Baseline in the same run: today's start, the plugin before issue 34, in which every tree's files
were held to its manifest by name and size (``TODAY_CHECK`` below: the manifest read, not
hashed) *before* the socket served, and nothing at mount: ``python -m bench.start_trees today
ARGS`` runs that pass, then the plugin with its tree checks off (``Config.check_trees``). Its
trees are checked when its socket serves.

Ours and today's run in 3 interleaved rounds (ours, today, today, ours, ...: the order rotated
each round), each a fresh process on the same cache (its page cache warm for both). Reported:
the medians of each side's rounds and each round's ratio, for "serving" and for "checked".
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pathlib
import re
import stat
import statistics
import subprocess
import sys
import time
from typing import Any

from bench import mount_warm, result
from nodeplugin import __main__ as plugin_main
from nodeplugin.cache import layout
from openapi import manifest

TREES = 1000
FILES_PER_TREE = 12
ROUNDS = 3
TODAY = re.compile(r"today's start check: ([0-9.]+)s")
CHECKED = re.compile(r"start checks: (\d+) published trees checked in ([0-9.]+)s")


def _files(i: int) -> dict[str, bytes]:
    files = {f"model-{j:05d}-of-00010.safetensors": bytes([i % 256, j]) * (512 + j)
             for j in range(FILES_PER_TREE - 2)}
    files["config.json"] = f'{{"tree": {i}}}\n'.encode()
    files["tokenizer/tokenizer.json"] = b"t" * (700 + i)
    return files


def _populate(cache: layout.Layout) -> None:
    sys.path.insert(0, str(mount_warm.REPO))
    from devkit import trees  # the same layout the materializers publish

    for i in range(TREES):
        trees.publish_tree(cache, f"t{i}", _files(i))


def today_check(cache: layout.Layout) -> int:
    """Today's start check (``scrub.verify_published`` before issue 34): each published tree's
    kept manifest read (not hashed) and its files walked, held to its names, types and sizes;
    a tree without a kept manifest left alone. The number of trees it found wrong."""
    wrong = 0
    for digest in cache.published():
        try:
            entries = manifest.parse((cache.published_path(digest) / layout.MANIFEST).read_bytes())
        except (OSError, manifest.ManifestError):
            continue
        root = cache.published_path(digest)
        found: dict[str, int] = {}
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            rel = os.path.relpath(directory, root)
            for name in dirnames + filenames:
                path = name if rel == "." else f"{rel}/{name}"
                if rel == "." and name in (layout.MARKER, layout.MANIFEST):
                    continue
                mode = os.lstat(os.path.join(directory, name)).st_mode
                if stat.S_ISDIR(mode):
                    continue
                found[path] = os.lstat(os.path.join(directory, name)).st_size
        if {e.path: e.size for e in entries} != found:
            wrong += 1
    return wrong


def _args(base: pathlib.Path, kubeconfig: pathlib.Path, socket: pathlib.Path) -> list[str]:
    return ["--node-name", "bench", "--endpoint", f"unix://{socket}", "--root",
            str(base / "cache"), "--kubelet-dir", str(base / "kubelet"), "--kubeconfig",
            str(kubeconfig), "--import-dir", str(base / "imports"), "--log-level", "INFO"]


async def _today(argv: list[str]) -> None:
    config = plugin_main.config_from(plugin_main.parser().parse_args(argv))
    began = time.monotonic()
    await asyncio.to_thread(today_check, layout.Layout(config.root))
    print(f"today's start check: {time.monotonic() - began:.3f}s", flush=True)
    await plugin_main.serve(dataclasses.replace(config, check_trees=False))


async def _one(side: str, base: pathlib.Path, kubeconfig: pathlib.Path
               ) -> tuple[float, float, float]:
    """Spawn one plugin; seconds until it serves, until every tree was checked, and what the
    checks took (ours: the pass's own time, by its log; today: its pass before serving)."""
    socket = base / f"{side}.sock"
    log_path = base / f"{side}.log"
    args = _args(base, kubeconfig, socket)
    command = ([sys.executable, "-m", "bench.start_trees", "today", *args] if side == "today"
               else [sys.executable, "-m", "nodeplugin", *args])
    log = log_path.open("wb")
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=mount_warm.REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        await mount_warm.wait_serving(socket, timeout=120)
        serving = time.perf_counter() - began
        if side == "today":
            found = TODAY.search(log_path.read_text(errors="replace"))
            assert found is not None
            return serving, serving, float(found.group(1))  # checked before it served
        deadline = time.monotonic() + 120
        while True:
            found = CHECKED.search(log_path.read_text(errors="replace"))
            if found:
                assert int(found.group(1)) == TREES, found.group(0)
                return serving, time.perf_counter() - began, float(found.group(2))
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{side}: the trees were not all checked:\n"
                                   f"{log_path.read_text(errors='replace')[-3000:]}")
            await asyncio.sleep(0.002)
    finally:
        mount_warm.stop(process)
        log.close()
        socket.unlink(missing_ok=True)


async def _run(base: pathlib.Path) -> dict[str, Any]:
    cache = layout.Layout(base / "cache")
    began = time.perf_counter()
    _populate(cache)
    populated = time.perf_counter() - began
    assert today_check(cache) == 0
    (base / "kubelet").mkdir()
    (base / "imports").mkdir()
    figures: dict[str, list[tuple[float, float, float]]] = {"ours": [], "today": []}
    with mount_warm.api_server(base) as server:
        for r in range(ROUNDS):
            for side in (("ours", "today") if r % 2 == 0 else ("today", "ours")):
                figures[side].append(await _one(side, base, server.kubeconfig))
    assert len(cache.published()) == TREES  # nothing was quarantined on the way
    return {
        "populate_s": round(populated, 1),
        **{f"{side}_{what}_rounds_s": [round(r[i], 3) for r in rounds]
           for side, rounds in figures.items()
           for i, what in enumerate(("serving", "checked", "pass"))},
    }


def main() -> None:
    with mount_warm.workspace() as base:
        figures = asyncio.run(_run(base))
    params = {"trees": TREES, "files_per_tree": FILES_PER_TREE, "rounds": ROUNDS, **figures}
    for what in ("serving", "checked"):
        ours, today = figures[f"ours_{what}_rounds_s"], figures[f"today_{what}_rounds_s"]
        result.report(f"start-trees-{what}", statistics.median(ours), "s",
                      statistics.median(today), higher_is_better=False, params=params,
                      rounds=list(zip(ours, today, strict=True)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "today":
        asyncio.run(_today(sys.argv[2:]))
    else:
        main()
