"""Run a real single-member etcd (Debian's ``/usr/bin/etcd``) for tests and benchmarks.

Each instance lives in its own directory on free loopback ports and belongs to the test that made
it: start, graceful stop, ``kill -9``, ``SIGSTOP``/``SIGCONT`` (a hang) and restart on the same data
directory (what a crash and recovery look like to a client). Output goes to ``<dir>/etcd.log``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import pathlib
import shutil
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs import authority
from devkit.harness import apiserver, processes

BINARY = os.environ.get("ETCD_BINARY") or shutil.which("etcd") or "/usr/bin/etcd"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


@dataclasses.dataclass(frozen=True)
class Tls:
    """A CA, etcd's serving certificate (127.0.0.1) and a client certificate it accepts."""

    ca: pathlib.Path
    server_cert: pathlib.Path
    server_key: pathlib.Path
    client_cert: pathlib.Path
    client_key: pathlib.Path

    @classmethod
    def make(cls, directory: pathlib.Path) -> Tls:
        files = authority.ensure(directory)
        ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "apiserver")]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )  # fmt: skip
        client_cert, client_key = directory / "client.crt", directory / "client.key"
        client_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        client_key.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))  # fmt: skip
        return cls(files.ca_cert, files.cert, files.key, client_cert, client_key)


PORT_ATTEMPTS = 5


class PortTaken(RuntimeError):
    """etcd could not bind a port chosen for it."""


class Etcd:
    """One etcd member; ``url`` is its client URL on 127.0.0.1 (HTTPS with client-certificate
    authentication when ``tls`` is given, plain HTTP otherwise)."""

    def __init__(
        self,
        directory: pathlib.Path,
        *,
        progress_interval: float | None = None,
        extra_args: Sequence[str] = (),
        tls: Tls | None = None,
    ) -> None:
        self.directory = directory.resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.tls = tls
        self.client_port = apiserver.free_port()
        self.peer_port = apiserver.free_port()
        self.progress_interval = progress_interval
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self.started = False
        """Whether it ever served: from then on its ports are part of its identity."""

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.client_port}"

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
        if self.tls is not None:
            command += ["--cert-file", str(self.tls.server_cert),
                        "--key-file", str(self.tls.server_key),
                        "--trusted-ca-file", str(self.tls.ca), "--client-cert-auth"]  # fmt: skip
        if self.progress_interval is not None:
            command += ["--experimental-watch-progress-notify-interval",
                        f"{int(self.progress_interval * 1000)}ms"]  # fmt: skip
        return [*command, *self.extra_args]

    def start(self) -> None:
        """Start (or restart on the same data directory) and wait until it serves.

        A first start whose port was taken between choosing it and etcd's bind (another
        process got it from the kernel meanwhile) tries again on new ports; a restart keeps its
        ports, which its clients and its data directory know."""
        for _ in range(PORT_ATTEMPTS - 1):
            try:
                self._start_once()
                return
            except PortTaken:
                if self.started:
                    raise
                shutil.rmtree(self.directory / "data", ignore_errors=True)
                self.client_port = apiserver.free_port()
                self.peer_port = apiserver.free_port()
        self._start_once()

    def _start_once(self) -> None:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("etcd is already running")
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.log()[offset:]
                error = PortTaken if "address already in use" in output else RuntimeError
                raise error(f"etcd exited with {self.process.returncode}:\n{output}")
            if self.healthy():
                self.started = True
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"etcd not healthy in {START_TIMEOUT}s:\n{self.log()[-4000:]}")

    def healthy(self) -> bool:
        verify: ssl.SSLContext | bool = False
        if self.tls is not None:
            verify = ssl.create_default_context(cafile=str(self.tls.ca))
            verify.load_cert_chain(self.tls.client_cert, self.tls.client_key)
        try:
            response = httpx.get(f"{self.url}/health", timeout=1.0, verify=verify)
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
        """SIGSTOP: the process keeps its sockets but answers nothing (a hang). Returns once
        every thread is stopped."""
        assert self.process is not None
        processes.pause(self.process.pid)

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
    tls: Tls | None = None,
) -> Iterator[Etcd]:
    member = Etcd(directory, progress_interval=progress_interval, extra_args=extra_args, tls=tls)
    member.start()
    try:
        yield member
    finally:
        member.kill()
