"""``make demo`` run non-interactively: every step completes, with and without resolution.

Until the controllers are in the build nothing resolves the demo's artifact, so one test plays
the controller (it writes the resolved status as the worker, with the digest computed from the
fixture hub by the product's own ``hub`` code) and checks the demo then downloads, shows the bar
and mounts files equal to the hub's; the other checks the explanation and the refused mount.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import pathlib
import queue
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest

from devkit.harness import apiserver as support
from hub import huggingface, listing

REPO = support.REPO
STEPS = [f"==> step {n}:" for n in range(1, 8)]


def _controllers_in_build() -> bool:
    done = subprocess.run([sys.executable, "-m", "apiserver", "--help"], cwd=REPO,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return "--controllers" in done.stdout


class DemoProcess:
    def __init__(self, base: pathlib.Path, resolve_timeout: float) -> None:
        env = dict(os.environ, DEMO_NONINTERACTIVE="1", DEMO_DIR=str(base),
                   DEMO_RESOLVE_TIMEOUT=str(resolve_timeout),
                   DEMO_MODEL_BYTES=str(6 << 20), DEMO_BYTES_PER_SECOND=str(4 << 20),
                   PYTHONUNBUFFERED="1")  # fmt: skip
        self.process = subprocess.Popen([sys.executable, "-m", "demo"], cwd=REPO, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed; output so far:\n" + "\n".join(self.seen))

    def finish(self, timeout: float = 120) -> str:
        code = self.process.wait(timeout)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        output = "\n".join(self.seen)
        assert code == 0, output
        return output

    def kill(self) -> None:
        """Always called last: stop the process if it still runs and close its pipe."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _resolve_as_the_worker(output: str, base: pathlib.Path) -> None:
    """What the resolver will do: revision -> commit, listing -> digest, status as the worker."""
    endpoint = re.search(r"(http://127\.0\.0\.1:\d+)/demo/tiny-model", output)
    server = re.search(r"(https://127\.0\.0\.1:\d+);", output)
    assert endpoint and server, output

    async def digest() -> tuple[str, str, int, int]:
        async with httpx.AsyncClient() as client:
            hf = huggingface.HuggingFace(client, endpoint.group(1))
            commit = await hf.resolve_revision("demo/tiny-model", "main", token=None)
            kept, _, value = await listing.manifest_for(hf, "demo/tiny-model", commit, [], [],
                                                        token=None)  # fmt: skip
            return commit, value, len(kept), sum(f.size for f in kept)

    commit, manifest_digest, count, size = asyncio.run(digest())
    data = base / "server"
    token = support.read_tokens(data / "tokens.csv")
    worker = next(t for user, t in token.items() if user != "admin")
    path = "/apis/worker.gpustack.ai/v1/namespaces/demo/modelartifacts/tiny-model"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with httpx.Client(base_url=server.group(1), verify=support.ssl_context(data / "ca.crt"),
                      headers={"Authorization": f"Bearer {worker}"}) as client:  # fmt: skip
        artifact = client.get(path).json()
        artifact["status"] = {
            "observedGeneration": 1,
            "resolved": {"revision": commit, "manifestDigest": manifest_digest,
                         "digestSource": "Hub", "fileCount": count, "sizeBytes": size,
                         "resolvedTime": now, "lastValidatedTime": now},
            "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved",
                            "message": "resolved by the test", "lastTransitionTime": now}],
        }  # fmt: skip
        response = client.put(f"{path}/status", json=artifact)
        assert response.status_code == 200, response.text


@pytest.mark.skipif(os.geteuid() != 0, reason="the mount step needs root")
def test_the_whole_flow_mounts_the_hub_files(tmp_path: pathlib.Path) -> None:
    base = tmp_path / "demo"
    demo = DemoProcess(base, resolve_timeout=90)
    try:
        demo.wait_for("==> step 5:")
        if not _controllers_in_build():
            _resolve_as_the_worker("\n".join(demo.seen), base)
        demo.wait_for("Resolved: sha256:")
        output = demo.finish()
    finally:
        demo.kill()
    for marker in STEPS:
        assert marker in output
    assert re.search(r"\[#{30}\] 100\.0%\s+6\.0 MiB / 6\.0 MiB\s+mounted", output), output
    assert re.search(r"model\.safetensors\s+6\.0 MiB\s+ok", output), output
    assert re.search(r"config\.json\s+\d+ B\s+ok", output), output
    assert "MISMATCH" not in output
    assert re.search(r"tiny-model\s+demo/tiny-model\s+[0-9a-f]{12}\s+6\.0MiB", output), output
    assert "demo complete." in output and "cleaned up" in output
    assert not (base / "cache").exists() and not (base / "kubelet").exists()
    with open("/proc/self/mountinfo") as handle:
        assert str(base) not in handle.read()


def test_it_says_what_is_not_there_yet(tmp_path: pathlib.Path) -> None:
    """Without controllers: the explanation and the refused mount. With them: no such notes,
    the artifact resolves by itself."""
    controllers = _controllers_in_build()
    demo = DemoProcess(tmp_path / "demo", resolve_timeout=90 if controllers else 2)
    try:
        output = demo.finish()
    finally:
        demo.kill()
    for marker in STEPS:
        assert marker in output
    assert "demo complete." in output
    if controllers:
        assert "controllers (issue 9)" not in output
        assert "Resolved: sha256:" in output
        return
    assert "nothing in this build writes an artifact's status yet" in output
    assert "NodePublishVolume: PERMISSION_DENIED" in output and "Resolved=True" in output
    assert "controllers (issue 9)" in output
