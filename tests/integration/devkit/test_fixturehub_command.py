"""``python -m devkit.fixturehub`` as an operator runs it: a process serving a local directory and
generated files on the address it is given, read by the real ``huggingface_hub`` and by the
product's own hub client over TLS with the certificate it prints; Ctrl-C stops it.

The address is 127.0.0.2 (loopback, but not 127.0.0.1): the hub must listen where it is told,
not on 127.0.0.1 with the name of another address, which is what a Pod on the real node needs
(``devkit/realnode/deploy.py`` gives it the rig's host address the same way).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

import httpx
import huggingface_hub
import pytest

from devkit.fixturehub import content
from devkit.harness.apiserver import REPO
from hub import config as hub_config
from hub import huggingface, listing

pytestmark = pytest.mark.integration

GUARD = 60.0  # against a hang only
LOCAL = {"config.json": b'{"architectures": ["Tiny"]}\n', "sub/tokenizer.json": b'{"v": 1}\n',
         "model.safetensors": os.urandom(1 << 20 | 123)}  # fmt: skip
GENERATED = ("extra/weights.bin", 3 << 20)


class Served:
    """The command's process and what it printed until it said it serves."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devkit.fixturehub", *argv], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.printed: list[str] = []

    def wait_serving(self) -> None:
        while (line := self.lines.get(timeout=GUARD)) != "serving until Ctrl-C":
            assert line is not None, "the command ended:\n" + "\n".join(self.printed)
            self.printed.append(line)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def value(self, prefix: str) -> str:
        """The first word after ``prefix`` on the line that starts with it."""
        found = [line.removeprefix(prefix).split()[0] for line in self.printed
                 if line.startswith(prefix)]  # fmt: skip
        assert found, f"no {prefix!r} in {self.printed}"
        return found[0]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=GUARD)


@contextlib.contextmanager
def serving(argv: Sequence[str]) -> Iterator[Served]:
    served = Served(argv)
    try:
        served.wait_serving()
        yield served
    finally:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait(timeout=GUARD)
        served.reader.join(timeout=GUARD)
        assert served.process.stdout is not None
        served.process.stdout.close()


@pytest.fixture
def model(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = tmp_path / "model"
    for path, data in LOCAL.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    (directory / ".cache").mkdir()
    (directory / ".cache" / "left-out").write_bytes(b"not served")
    return directory


def test_serves_a_directory_on_the_given_address_to_huggingface_hub(
    model: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    argv = ["--address", "127.0.0.2:0", "--repo", f"org/tiny={model}",
            "--generate", f"org/tiny:{GENERATED[0]}=3Mi"]  # fmt: skip
    with serving(argv) as served:
        endpoint = served.value("hub: ")
        assert endpoint.startswith("http://127.0.0.2:")
        assert served.value("cdn: ").startswith("http://127.0.0.2:")
        assert f"  model-artifact-huggingface-endpoint: {endpoint}" in served.printed
        port = endpoint.rsplit(":", 1)[1]
        commit = served.value("repository org/tiny at ").rstrip(":")

        folder = pathlib.Path(huggingface_hub.snapshot_download(
            "org/tiny", revision="main", endpoint=endpoint, cache_dir=tmp_path / "hf",
            token=False))  # fmt: skip
        found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        assert found == sorted([*LOCAL, GENERATED[0]])
        for path, data in LOCAL.items():
            assert (folder / path).read_bytes() == data
        generated, _ = content.make("org/tiny", GENERATED[0], GENERATED[1])
        assert (folder / GENERATED[0]).read_bytes() == generated.read()
        assert commit in str(folder)

        # Only the given address listens: 127.0.0.1 at that port is not this hub.
        with contextlib.suppress(httpx.TransportError):
            answer = httpx.get(f"http://127.0.0.1:{port}/api/models/org/tiny/revision/main")
            assert commit not in answer.text
        assert served.stop() == 0


async def test_tls_on_every_address_read_by_the_product_client(model: pathlib.Path) -> None:
    argv = ["--address", "0.0.0.0:0", "--public-host", "127.0.0.2", "--tls",
            "--repo", f"org/tiny={model}"]  # fmt: skip
    with serving(argv) as served:
        endpoint, ca = served.value("hub: "), served.value("ca: ")
        assert endpoint.startswith("https://127.0.0.2:")
        assert "  model-artifact-ca-bundle: fixture-hub-ca" in served.printed
        config = hub_config.HubConfig(huggingface_endpoint=endpoint, ca_bundle=ca)
        http = hub_config.make_client(config)
        try:
            hf = huggingface.HuggingFace(http, endpoint)
            commit = await hf.resolve_revision("org/tiny", "main", token=None)
            kept, _, _ = await listing.manifest_for(hf, "org/tiny", commit, (), (), token=None)
            assert sorted(f.path for f in kept) == sorted(LOCAL)
            assert {f.path for f in kept if f.lfs} == {"model.safetensors"}
            chunks = hf.stream("org/tiny", commit, "model.safetensors", token=None)
            async with contextlib.aclosing(chunks) as stream:
                body = b"".join([chunk async for chunk in stream])
        finally:
            await http.aclose()
        assert body == LOCAL["model.safetensors"]
        assert served.stop() == 0
        assert not pathlib.Path(ca).exists()  # the throwaway key and certificate went with it


def test_a_wildcard_address_needs_the_public_host() -> None:
    done = subprocess.run([sys.executable, "-m", "devkit.fixturehub", "--address", "0.0.0.0:0"],
                          cwd=REPO, capture_output=True, text=True, timeout=GUARD)  # fmt: skip
    assert done.returncode == 2
    assert "give --public-host" in done.stderr
