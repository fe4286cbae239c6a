"""A downloading "plugin" process for the crash tests: this file run as a script is a
``HubMaterializer`` asking ``ensure`` in a loop and printing its progress, the code path the CSI
node service drives. It can stop itself (SIGSTOP) at a crash point of the file store: after a
file was stored (``stored:<path>``), or once every file of the tree is stored and the store's
names synced, just before the tree's rename (``synced``); the test then kills it (kill -9) or
keeps the disk as it is first (a power loss)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

MiB = 1 << 20
TOKEN = "hf_proc_tok_0a1b2c"


def _driver_main(argv: list[str]) -> int:
    import asyncio

    from hub import config as hub_config
    from nodeplugin.cache import files, layout
    from nodeplugin.materialize import download, interface, ranges, transfer
    from openapi import manifest

    root, endpoint, repo, commit, digest, hold, pause = argv

    def stop(where: str) -> None:
        print(json.dumps({"paused": where}), flush=True)
        # Sent to this thread, the stop takes it before the call returns: nothing after the
        # crash point runs (a signal to the process may be taken by another thread first).
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        time.sleep(3600)

    class PausingStore(files.FileStore):
        def put(self, path: pathlib.Path, entry: manifest.Entry) -> None:
            super().put(path, entry)
            if pause == f"stored:{entry.path}":
                stop(pause)

        def sync(self) -> None:
            super().sync()
            if pause == "synced":
                stop(pause)

    settings = download.Settings(
        concurrency=2,
        memory_bytes=4 * MiB,
        tuning=transfer.Tuning(part_bytes=1 * MiB, checkpoint_bytes=1 * MiB),
        policy=ranges.Policy(stall_seconds=2.0, retry_base_seconds=0.05),
    )

    async def run() -> int:
        config = hub_config.HubConfig(huggingface_endpoint=endpoint)
        cache = layout.Layout(root)
        m = download.HubMaterializer.from_config(cache, config, settings,
                                                 store=PausingStore(cache))
        source = interface.Source("huggingFace", repo, commit)
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


class Driver:
    """One driver process over ``root``."""

    def __init__(self, root: pathlib.Path, endpoint: str, repo: str, commit: str, digest: str,
                 *, hold: bool = False, pause: str = "") -> None:
        env = dict(os.environ, DRIVER_TOKEN=TOKEN)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(root), endpoint, repo, commit, digest,
             "hold" if hold else "exit", pause],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
        )

    def progress(self) -> Iterator[dict[str, Any]]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            yield json.loads(line)

    def until(self, key: str, value: object = None) -> dict[str, Any]:
        """Read progress lines until one has ``key`` (equal to ``value`` when given)."""
        for line in self.progress():
            if key in line and (value is None or line[key] == value):
                return line
        _, err = self.proc.communicate(timeout=10)
        raise AssertionError(f"the driver ended before {key}={value}: {err[-2000:]}")

    def paused(self) -> None:
        """Wait until the driver stopped itself at its crash point (SIGSTOP taken)."""
        self.until("paused")
        self._stopped()

    def stop(self) -> None:
        """Stop the driver where it is (SIGSTOP), and wait until it is stopped."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        self._stopped()

    def _stopped(self) -> None:
        deadline = time.monotonic() + 30
        while _state(self.proc.pid) != "T":
            assert time.monotonic() < deadline, "the driver never stopped"
            time.sleep(0.01)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=10)  # reaps it and closes the pipes

    def wait(self) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


def _state(pid: int) -> str:
    text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return text.rsplit(")", 1)[1].split()[0]


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
    raise SystemExit(_driver_main(sys.argv[1:]))
