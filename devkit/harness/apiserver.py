"""Start the real API server (``python -m apiserver --standalone``) as a subprocess for tests.

The server generates its CA, serving certificate, tokens and kubeconfigs under ``data_dir`` on
first start and reuses them afterwards, so a stop + start on the same directory is a restart.
Its stdout and stderr go to ``data_dir/server.log`` (appended across restarts; ``log_name``
picks another file, for replicas sharing one data directory on etcd storage, which then also
share the CA, the serving certificate and the tokens).

The controllers are off (``--controllers=none``) unless ``extra_args`` names ``--controllers``:
tests of the API alone must not see a resolver writing status (and trying the public hub).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

REPO = pathlib.Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
PLUGIN_USER = "system:serviceaccount:gpustack-system:model-manager-node"
STOP_TIMEOUT = 15.0


@dataclasses.dataclass
class RunningServer:
    url: str
    data_dir: pathlib.Path
    ca_file: pathlib.Path
    admin_token: str
    worker_token: str
    kubeconfig: pathlib.Path
    worker_kubeconfig: pathlib.Path
    process: subprocess.Popen[bytes]
    log_name: str = "server.log"

    @property
    def plugin_kubeconfig(self) -> pathlib.Path:
        """The node-plugin identity (bound to ``--plugin-node``, default ``local``)."""
        return self.data_dir / "plugin.kubeconfig"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def log_file(self) -> pathlib.Path:
        return self.data_dir / self.log_name

    def log(self) -> str:
        """The server's output so far (for failure messages)."""
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def peak_rss(self) -> int:
        """The server process's peak resident set (``VmHWM``), in bytes."""
        status = pathlib.Path(f"/proc/{self.process.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmHWM in /proc/{self.process.pid}/status")

    def client(self, *, token: str | None = None, http2: bool = False) -> httpx.Client:
        """A client trusting the server's CA and sending the admin token by default."""
        return httpx.Client(
            base_url=self.url,
            verify=ssl_context(self.ca_file),
            http2=http2,
            headers={"Authorization": f"Bearer {token or self.admin_token}"},
            timeout=30.0,
        )

    def wait_for(self, path: str, timeout: float = START_TIMEOUT) -> dict[str, object]:
        """GET ``path`` (as the admin) until it answers 200, e.g. the NodeModelStore the worker
        creates for a ``--node`` soon after start."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                response = client.get(path)
                if response.status_code == 200:
                    found: dict[str, object] = response.json()
                    return found
                if time.monotonic() > deadline:
                    raise AssertionError(f"{path} still answers {response.status_code} after "
                                         f"{timeout}s:\n{self.log()[-4000:]}")
                time.sleep(0.05)

    def stop(self) -> None:
        """Graceful stop: SIGTERM, then wait (SIGKILL if it does not exit in time)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGUSR1)  # stacks into the log, then kill
                time.sleep(1)
                self.kill()
                raise RuntimeError(
                    f"server ignored SIGTERM for {STOP_TIMEOUT}s:\n{self.log()[-6000:]}"
                ) from None

    def kill(self) -> None:
        """Crash: SIGKILL, then wait."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def watch_events(response: httpx.Response, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events of a streamed watch response (fewer if it ends first)."""
    events: list[dict[str, Any]] = []
    for line in response.iter_lines():
        if line:
            events.append(json.loads(line))
            if len(events) == count:
                break
    return events


def etcd_args(url: str, *extra: str) -> list[str]:
    """The flags that put a server on the etcd at ``url`` (compaction off: tests compact
    explicitly when they mean to)."""
    return ["--storage=etcd", "--etcd-servers", url, "--etcd-compaction-interval", "0", *extra]


def ssl_context(ca_file: pathlib.Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def read_tokens(path: pathlib.Path) -> dict[str, str]:
    """user name -> token from a static token file (``token,user,uid,"groups"``)."""
    users: dict[str, str] = {}
    with path.open(newline="") as handle:
        for row in csv.reader(handle):
            if len(row) >= 2 and not row[0].startswith("#"):
                users[row[1]] = row[0]
    return users


class PortTaken(RuntimeError):
    """The chosen port was taken between picking it and the server binding it."""


def start(
    data_dir: pathlib.Path,
    *,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    log_name: str = "server.log",
) -> RunningServer:
    """Run the standalone server on ``port`` (a free one by default) and wait for /readyz."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    attempts = 1 if port else 3
    for attempt in range(attempts):
        try:
            return _start_once(data_dir, port or free_port(), extra_args, log_name)
        except PortTaken:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _start_once(data_dir: pathlib.Path, port: int, extra_args: Sequence[str],
                log_name: str) -> RunningServer:
    if not any(arg.startswith("--controllers") for arg in extra_args):
        extra_args = [*extra_args, "--controllers=none"]
    command = [
        sys.executable, "-m", "apiserver", "--standalone",
        "--data-dir", str(data_dir), "--port", str(port), "--bind", "127.0.0.1",
        *extra_args,
    ]  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with (data_dir / log_name).open("ab") as log:
        log.write(f"--- {' '.join(command)}\n".encode())
        log.flush()
        offset = log.tell()
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        return _wait_ready(process, data_dir, port, offset, log_name)
    except BaseException:
        if process.poll() is None:
            process.kill()
        process.wait()
        raise


def _wait_ready(
    process: subprocess.Popen[bytes], data_dir: pathlib.Path, port: int, offset: int,
    log_name: str = "server.log",
) -> RunningServer:
    url = f"https://127.0.0.1:{port}"
    ca_file = data_dir / "ca.crt"
    deadline = time.monotonic() + START_TIMEOUT
    last_error = "no attempt yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with (data_dir / log_name).open("rb") as handle:
                handle.seek(offset)
                log = handle.read().decode(errors="replace")
            if "Address already in use" in log:
                raise PortTaken(f"port {port} was taken")
            raise RuntimeError(f"server exited with {process.returncode}:\n{log[-4000:]}")
        if ca_file.exists():
            try:
                with httpx.Client(verify=ssl_context(ca_file), timeout=2.0) as client:
                    if client.get(f"{url}/readyz").status_code == 200:
                        break
                    last_error = "readyz not 200"
            except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
                last_error = repr(exc)
        time.sleep(0.05)
    else:
        process.kill()
        process.wait()
        log = (data_dir / log_name).read_text(errors="replace")
        raise RuntimeError(f"server not ready in {START_TIMEOUT}s ({last_error}):\n{log[-4000:]}")
    tokens = read_tokens(data_dir / "tokens.csv")
    worker_token = next(token for user, token in tokens.items()
                        if user not in ("admin", PLUGIN_USER))
    return RunningServer(
        url=url,
        data_dir=data_dir,
        ca_file=ca_file,
        admin_token=tokens["admin"],
        worker_token=worker_token,
        kubeconfig=data_dir / "kubeconfig",
        worker_kubeconfig=data_dir / "worker.kubeconfig",
        process=process,
        log_name=log_name,
    )


@contextlib.contextmanager
def running(
    data_dir: pathlib.Path, *, extra_args: Sequence[str] = (), log_name: str = "server.log"
) -> Iterator[RunningServer]:
    """``start`` for a ``with`` block: SIGTERM at the end, SIGKILL if that did not stop it."""
    server = start(data_dir, extra_args=extra_args, log_name=log_name)
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            server.kill()
