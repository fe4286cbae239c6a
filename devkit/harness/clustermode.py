"""The real API server in cluster mode (``python -m apiserver`` without ``--standalone``) against
the fixture control plane, as a subprocess, for tests and benchmarks.

``prepare`` gives the control plane what the chart gives a real cluster: the worker's
ServiceAccount token and its token for the plugins' audience, ``system:auth-delegator``, the
extension-apiserver-authentication reader Role in kube-system, get on Pods in the plugin
namespace, and the controllers' Lease there, which also keeps the server's revision mark (create,
and get and update by name), and Events (create). ``running`` starts the server with
a kubeconfig for that ServiceAccount and a serving certificate of its own CA, and waits for
``/readyz`` (always allowed, so no credential is needed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import httpx

from devkit.controlplane import Authority, ControlPlane, KeyPair, Rule, Subject
from devkit.controlplane import resources as kinds
from devkit.controlplane import service_account as sa_user
from devkit.harness import aggregator
from devkit.harness.apiserver import REPO, PortTaken, free_port
from openapi import install
from openapi import plugin as plugin_api

NAMESPACE = install.DEFAULT_NAMESPACE
WORKER = sa_user(NAMESPACE, install.WORKER_SERVICE_ACCOUNT, uid="5b0c6f2e-worker")
WORKER_TOKEN = "fixture-worker-sa-token"
PLUGIN_AUDIENCE_TOKEN = "fixture-worker-plugin-audience-token"
"""The worker's token for the plugins' audience (the chart's projected ``plugin-token`` volume):
``start`` writes it where ``--plugin-token-file`` reads it, ``prepare`` makes it valid."""
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def add_plugin_token(cp: ControlPlane) -> None:
    """The worker's token for the plugins' audience, as the chart's projected volume has it
    (``start`` writes it for ``--plugin-token-file``); kube-apiserver itself refuses it."""
    cp.add_token(PLUGIN_AUDIENCE_TOKEN, WORKER, audiences=(plugin_api.AUDIENCE,))


def prepare(cp: ControlPlane, *, token: str = WORKER_TOKEN) -> None:
    cp.add_token(token, WORKER)
    add_plugin_token(cp)
    if cp.store.find(kinds.NAMESPACES, "", NAMESPACE) is None:  # the server's own, the chart's
        cp.seed(kinds.NAMESPACES, {"metadata": {"name": NAMESPACE, "labels": {
            "kubernetes.io/metadata.name": NAMESPACE}}})
    worker = Subject("ServiceAccount", install.WORKER_SERVICE_ACCOUNT, NAMESPACE)
    cp.policy.bind("system:auth-delegator", [worker], name="model-manager-auth-delegator")
    cp.policy.bind("extension-apiserver-authentication-reader", [worker],
                   namespace="kube-system", role_kind="Role",
                   name="model-manager-authentication-reader")
    cp.policy.grant(worker, Rule(("get",), ("",), ("pods",)), namespace=NAMESPACE,
                    name="model-manager-worker-pods")
    cp.policy.grant(worker, Rule(("create",), ("coordination.k8s.io",), ("leases",)),
                    namespace=NAMESPACE, name="model-manager-worker-lease-create")
    cp.policy.grant(worker, Rule(("get", "update"), ("coordination.k8s.io",), ("leases",),
                                 (install.LEASE,)),
                    namespace=NAMESPACE, name="model-manager-worker-lease")
    cp.policy.grant(worker, Rule(("create",), ("",), ("events",)),
                    name="model-manager-worker-events")


@dataclasses.dataclass
class ClusterServer:
    url: str
    data_dir: pathlib.Path
    serving_ca: Authority
    process: subprocess.Popen[bytes]
    controlplane: ControlPlane

    @property
    def ca_pem(self) -> bytes:
        return self.serving_ca.cert_pem

    @property
    def log_file(self) -> pathlib.Path:
        return self.data_dir / "server.log"

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def aggregator(self, *, http2: bool = True,
                   certificate: KeyPair | bool | None = True) -> aggregator.AggregatorClient:
        """The aggregator's client: the front-proxy certificate unless another (or None)."""
        cert = self.controlplane.front_proxy.client if certificate is True else certificate
        return aggregator.AggregatorClient(self.url, self.ca_pem,
                                           cert if isinstance(cert, KeyPair) else None,
                                           http2=http2)

    def client(self, token: str | None = None, *, http2: bool = False,
               certificate: KeyPair | None = None) -> httpx.Client:
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        if certificate is not None:
            certificate.load_into(context)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, verify=context, http2=http2, headers=headers,
                            timeout=30.0)

    def kubeconfig(self, path: pathlib.Path, token: str) -> pathlib.Path:
        """A kubeconfig that calls this server directly with ``token`` (TokenReview)."""
        import base64

        import yaml

        document = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "mm", "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(self.ca_pem).decode()}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "mm", "context": {"cluster": "mm", "user": "u"}}],
            "current-context": "mm",
        }  # fmt: skip
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise RuntimeError(f"server ignored SIGTERM:\n{self.log()[-6000:]}") from None


def serving_files(directory: pathlib.Path) -> tuple[Authority, pathlib.Path, pathlib.Path]:
    ca = Authority("model-manager-serving-ca")
    cert, key = ca.serving(("127.0.0.1", "localhost")).write(directory, "serving")
    return ca, cert, key


def start(cp: ControlPlane, data_dir: pathlib.Path, *, extra_args: Sequence[str] = (),
          token: str | None = WORKER_TOKEN, client: KeyPair | None = None,
          wait_ready: bool = True) -> ClusterServer:
    """``token`` (or ``client``, a client certificate) is the worker's credential. The
    controllers are off (``--controllers=none``) unless ``extra_args`` names ``--controllers``."""
    if not any(arg.startswith("--controllers") for arg in extra_args):
        extra_args = [*extra_args, "--controllers=none"]
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = cp.write_kubeconfig(data_dir / "worker.kubeconfig",
                                     token=token if client is None else None, client=client)
    ca, cert, key = serving_files(data_dir)
    plugin_token = data_dir / "plugin-token"
    plugin_token.write_text(PLUGIN_AUDIENCE_TOKEN)
    for attempt in range(3):
        port = free_port()
        command = [
            sys.executable, "-m", "apiserver", "--data-dir", str(data_dir),
            "--port", str(port), "--bind", "127.0.0.1",
            "--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
            "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, *extra_args,
            # last, over a chart's path: where the projected volume would put it
            f"--plugin-token-file={plugin_token}",
        ]  # fmt: skip
        with (data_dir / "server.log").open("ab") as log:
            log.write(f"--- {' '.join(command)}\n".encode())
            log.flush()
            offset = log.tell()
            process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                       env=dict(os.environ, PYTHONUNBUFFERED="1"))
        server = ClusterServer(f"https://127.0.0.1:{port}", data_dir, ca, process, cp)
        try:
            if wait_ready:
                _wait_ready(server, offset)
            return server
        except PortTaken:
            if attempt == 2:
                raise
        except BaseException:
            if process.poll() is None:
                process.kill()
            process.wait()
            raise
    raise AssertionError("unreachable")


def _wait_ready(server: ClusterServer, offset: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    last = "no attempt yet"
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            with server.log_file.open("rb") as handle:
                handle.seek(offset)
                text = handle.read().decode(errors="replace")
            if "Address already in use" in text:
                raise PortTaken(server.url)
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{text[-4000:]}")
        try:
            with httpx.Client(verify=context, timeout=2.0) as client:
                if client.get(f"{server.url}/readyz").status_code == 200:
                    return
                last = "readyz not 200"
        except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
            last = repr(exc)
        time.sleep(0.05)
    server.process.kill()
    server.process.wait()
    raise RuntimeError(f"server not ready in {START_TIMEOUT}s ({last}):\n{server.log()[-4000:]}")


@contextlib.contextmanager
def running(cp: ControlPlane, data_dir: pathlib.Path, *, extra_args: Sequence[str] = (),
            token: str | None = WORKER_TOKEN,
            client: KeyPair | None = None) -> Iterator[ClusterServer]:
    server = start(cp, data_dir, extra_args=extra_args, token=token, client=client)
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            if server.process.poll() is None:
                server.process.kill()
                server.process.wait()
