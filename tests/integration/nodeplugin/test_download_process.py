"""kill -9 of a downloading plugin process: the restart resumes from checkpoints, and a tree
published before the kill is served at once after it.

The "plugin" here is this file run as a script: a ``HubMaterializer`` asking ``ensure`` in a loop
and printing its progress, the same code path the CSI node service drives.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

MiB = 1 << 20
REPO = "org/model"
TOKEN = "hf_proc_tok_0a1b2c"


def _driver_main(argv: list[str]) -> int:
    from hub import config as hub_config
    from nodeplugin.cache import layout
    from nodeplugin.materialize import download, interface, ranges, transfer

    root, endpoint, commit, digest, hold = argv
    settings = download.Settings(
        concurrency=2,
        memory_bytes=4 * MiB,
        tuning=transfer.Tuning(part_bytes=1 * MiB, checkpoint_bytes=1 * MiB),
        policy=ranges.Policy(stall_seconds=2.0, retry_base_seconds=0.05),
    )

    async def run() -> int:
        config = hub_config.HubConfig(huggingface_endpoint=endpoint)
        m = download.HubMaterializer.from_config(layout.Layout(root), config, settings)
        source = interface.Source("huggingFace", REPO, commit)
        request = interface.Request(digest, source, os.environ.get("DRIVER_TOKEN"))
        while True:
            p = await m.ensure(request)
            print(json.dumps({"state": p.state.value, "received": p.received_bytes}), flush=True)
            if p.state == interface.State.FAILED:
                return 1
            if p.state == interface.State.PUBLISHED and hold != "hold":
                await m.close()
                return 0
            await asyncio.sleep(0.05)

    return asyncio.run(run())


if __name__ == "__main__":
    raise SystemExit(_driver_main(sys.argv[1:]))


# --- the tests (imported by pytest only) ---------------------------------------------------------

from devkit import fixturehub  # noqa: E402
from hub import config as hub_config  # noqa: E402
from hub import huggingface, listing  # noqa: E402
from nodeplugin.cache import layout  # noqa: E402

pytestmark = pytest.mark.integration


class Driver:
    def __init__(self, root: pathlib.Path, hub: fixturehub.Hub, digest: str, hold: bool) -> None:
        env = dict(os.environ, DRIVER_TOKEN=TOKEN)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(root), hub.endpoint, hub.repo(REPO).commit, digest,
             "hold" if hold else "exit"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
        )

    def progress(self) -> Iterator[dict[str, object]]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            yield json.loads(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=10)  # reaps it and closes the pipes

    def wait(self) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


@pytest.fixture
def drivers() -> Iterator[list[Driver]]:
    started: list[Driver] = []
    try:
        yield started
    finally:
        for d in started:
            d.kill()


async def _digest(hub: fixturehub.Hub) -> str:
    client = hub_config.make_client(hub_config.HubConfig(huggingface_endpoint=hub.endpoint))
    try:
        source = huggingface.HuggingFace(client, hub.endpoint)
        commit = hub.repo(REPO).commit
        return (await listing.manifest_for(source, REPO, commit, (), (), token=TOKEN))[2]
    finally:
        await client.aclose()


async def test_kill_mid_download_then_restart_resumes(
    tmp_path: pathlib.Path, drivers: list[Driver]
) -> None:
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"a.safetensors": 24 * MiB, "b.safetensors": 24 * MiB,
                            "config.json": b"{}"}, private_token=TOKEN)
        total = 48 * MiB + 2
        for name in ("a.safetensors", "b.safetensors"):
            hub.faults(REPO, name).rate = 6 * MiB
        digest = await _digest(hub)
        root = tmp_path / "cache"
        first = Driver(root, hub, digest, hold=False)
        drivers.append(first)
        received = 0
        for line in first.progress():
            received = int(str(line["received"]))
            if received >= total // 2:
                break
        first.kill()
        assert received >= total // 2
        served_before = hub.bytes_served(REPO)
        hub.clear_faults()
        second = Driver(root, hub, digest, hold=False)
        drivers.append(second)
        code, err = second.wait()
        assert code == 0, err[-2000:]
        refetched = hub.bytes_served(REPO) - total
        # Lost at the kill: bytes past each file's last checkpoint and the look-ahead budget.
        assert refetched <= 4 * MiB + 2 * (1 * MiB + 1 * MiB), (refetched, served_before)
        tree = layout.Layout(root).published_path(digest)
        for name in ("a.safetensors", "b.safetensors", "config.json"):
            assert (tree / name).read_bytes() == hub.content(REPO, name).read()
        assert TOKEN not in err


async def test_kill_after_publication_serves_the_tree_at_once(
    tmp_path: pathlib.Path, drivers: list[Driver]
) -> None:
    with fixturehub.run() as hub:
        hub.add_repo(REPO, {"a.safetensors": 3 * MiB, "config.json": b"{}"},
                     private_token=TOKEN)
        digest = await _digest(hub)
        root = tmp_path / "cache"
        first = Driver(root, hub, digest, hold=True)
        drivers.append(first)
        for line in first.progress():
            if line["state"] == "Published":
                break
        first.kill()
        cache = layout.Layout(root)
        assert cache.is_published(digest)
        served = hub.bytes_served(REPO)
        second = Driver(root, hub, digest, hold=False)
        drivers.append(second)
        code, err = second.wait()  # bounded by wait's own timeout, never by a timed assertion
        assert code == 0, err[-2000:]
        # at once: the published tree is taken as it is (not a byte fetched, nothing partial)
        assert hub.bytes_served(REPO) == served
        tree = cache.published_path(digest)
        assert (tree / "a.safetensors").read_bytes() == hub.content(REPO, "a.safetensors").read()
        assert not cache.partials()
