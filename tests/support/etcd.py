"""Run a real single-member etcd (Debian's ``/usr/bin/etcd``) for tests and benchmarks.

Each instance lives in its own directory on free loopback ports and belongs to the test that made
it: start, graceful stop, ``kill -9``, ``SIGSTOP``/``SIGCONT`` (a hang) and restart on the same data
directory (what a crash and recovery look like to a client). Output goes to ``<dir>/etcd.log``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence

import httpx

from tests.support import apiserver

BINARY = os.environ.get("ETCD_BINARY") or shutil.which("etcd") or "/usr/bin/etcd"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


class Etcd:
    """One etcd member; ``url`` is its client URL (plain HTTP on 127.0.0.1)."""

    def __init__(
        self,
        directory: pathlib.Path,
        *,
        progress_interval: float | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.directory = directory.resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.client_port = apiserver.free_port()
        self.peer_port = apiserver.free_port()
        self.progress_interval = progress_interval
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def log_file(self) -> pathlib.Path:
        return self.directory / "etcd.log"

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def command(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        command = [
            BINARY, "--name", "test", "--data-dir", str(self.directory / "data"),
            "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"test={peer}", "--initial-cluster-state", "new",
            # a single member elects itself; short ticks make that (and restarts) quick
            "--heartbeat-interval", "20", "--election-timeout", "200",
            "--logger", "zap", "--log-level", "warn",
        ]  # fmt: skip
        if self.progress_interval is not None:
            command += ["--experimental-watch-progress-notify-interval",
                        f"{int(self.progress_interval * 1000)}ms"]  # fmt: skip
        return [*command, *self.extra_args]

    def start(self) -> None:
        """Start (or restart on the same data directory) and wait until it serves."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("etcd is already running")
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.process.returncode}:\n{self.log()}")
            if self.healthy():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"etcd not healthy in {START_TIMEOUT}s:\n{self.log()[-4000:]}")

    def healthy(self) -> bool:
        try:
            response = httpx.get(f"{self.url}/health", timeout=1.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200 and b'"true"' in response.content

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL if it does not exit in time)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.resume()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """``kill -9``: no chance to flush anything that was not already durable."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing (a hang)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.kill()
        self.start()


@contextlib.contextmanager
def running(
    directory: pathlib.Path,
    *,
    progress_interval: float | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[Etcd]:
    member = Etcd(directory, progress_interval=progress_interval, extra_args=extra_args)
    member.start()
    try:
        yield member
    finally:
        member.kill()
