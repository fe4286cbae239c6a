"""Run the real kubectl binaries against a test server."""

from __future__ import annotations

import dataclasses
import pathlib
import queue
import subprocess
import threading
import time
from collections.abc import Sequence

import pytest

DEFAULT = pathlib.Path("/usr/bin/kubectl")
SDK = pathlib.Path("/usr/lib/google-cloud-sdk/bin")
OLDEST = SDK / "kubectl.1.27"
NEWEST = SDK / "kubectl.1.33"
VERSIONS = [pytest.param(OLDEST, id="1.27"), pytest.param(NEWEST, id="1.33")]
"""The oldest and newest kubectl this product supports, for ``pytest.fixture(params=...)``."""


def of_version(binary: pathlib.Path, kubeconfig: pathlib.Path, cache_dir: pathlib.Path
               ) -> Kubectl:
    """``binary`` against ``kubeconfig``; the test fails (never skips) when the machine lacks it."""
    if not binary.exists():
        pytest.fail(f"{binary} is missing on this machine")
    return Kubectl(kubeconfig, cache_dir, binary)


@dataclasses.dataclass
class Kubectl:
    kubeconfig: pathlib.Path
    cache_dir: pathlib.Path
    binary: pathlib.Path = DEFAULT

    def command(self, args: Sequence[str]) -> list[str]:
        return [str(self.binary), f"--kubeconfig={self.kubeconfig}",
                f"--cache-dir={self.cache_dir}", *args]  # fmt: skip

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.command(args), input=stdin, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def fails(self, *args: str, stdin: str | None = None) -> str:
        """Run a command expected to fail; return its stderr."""
        result = self.run(*args, stdin=stdin, check=False)
        if result.returncode == 0:
            raise AssertionError(f"kubectl {' '.join(args)} succeeded:\n{result.stdout}")
        return result.stderr

    def stream(self, *args: str) -> Stream:
        return Stream(self.command(args))


class Stream:
    """A long-running kubectl (``get -w``) whose output lines are read with a deadline."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not seen in {timeout}s; got {self.seen}")

    def close(self) -> str:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        assert self.process.stderr is not None
        stderr = self.process.stderr.read()
        self.process.stderr.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return stderr

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
