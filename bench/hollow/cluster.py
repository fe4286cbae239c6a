"""Cluster mode for the fleet: the API server behind a real kube-apiserver's aggregation layer.

The control plane is ``cluster-up`` of the shared Kubernetes binaries (etcd, kube-apiserver with
the front-proxy CA and aggregator routing, kube-controller-manager, kube-scheduler and the
``agg`` network namespace; ``devkit.realnode.rig`` tears it down), without a kubelet: the fleet's
nodes are hollow. What the chart would install is applied from its own rendering: its
ServiceAccounts, RBAC, settings ConfigMap, CSIDriver (without it the worker withdraws every
NodeModelStore) and APIService, which trusts this run's serving CA. The API server runs in
cluster mode as a process in ``agg`` behind a Service without a selector whose Endpoints name it
(as the chart's Deployment would be: one replica, SQLite, its controllers embedded and electing
their leader on kube-apiserver's Lease).

Each hollow node is a Node object with a plugin Pod bound to it (tolerating every taint: no
kubelet ever reports the Node Ready), and the node's plugin calls kube-apiserver with a token
bound to that Pod (TokenRequest), so kube-apiserver authenticates and authorizes it by the
chart's RBAC and forwards its identity, Pod and node, through the aggregator, as it does a real
plugin's. The Pods never run, so they have no IP: the server's live-progress reads find no
plugin to ask (``progress.live`` is 0 in this mode).

Hold ``flock /tmp/realnode.lock`` around a run: the ports (6443, 2379...) and the ``agg``
namespace are one per machine.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import yaml

from apiserver.storage import sqlite
from apiserver.wiring import kubeconfig
from bench.hollow import backend as backends
from bench.hollow import fleet as fleets
from devkit import chartrbac
from devkit.controlplane import Authority
from devkit.harness import apiserver
from devkit.realnode import rig
from openapi import install

KAS = "https://127.0.0.1:6443"
AGG_IP = "10.250.0.2"
ADMIN_TOKEN = "admin-token"  # cluster-up's token file
NAMESPACE = install.DEFAULT_NAMESPACE
APPLIED = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
           "ConfigMap", "APIService", "CSIDriver")
READY_TIMEOUT = 120.0


NODE_ONLY = ("containerd", "runc", "ctr ", "mmdebstrap", "bridge")
"""What only a real node needs (``rig.missing`` names them too); the fleet starts none."""


def missing() -> list[str]:
    """What this machine lacks for cluster mode (the real control plane's needs), each named."""
    return [m for m in rig.missing() if not any(word in m for word in NODE_ONLY)]


def _script(cluster: rig.Rig, name: str) -> None:
    done = subprocess.run([str(rig.SHARED / name)], env=cluster.env, capture_output=True,
                          text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise rig.RigError(f"{name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n"
                           + cluster.logs())


def _pid(path: pathlib.Path) -> int:
    return int(path.read_text().strip())


class Kube:
    """kube-apiserver as its admin (cluster-up's token)."""

    def __init__(self, ca_file: pathlib.Path) -> None:
        self.client = httpx.Client(base_url=KAS, verify=apiserver.ssl_context(ca_file),
                                   headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                                   timeout=30.0)

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(path, json=body)
        if response.status_code >= 300:
            raise rig.RigError(f"POST {path}: {response.status_code} {response.text[:2000]}")
        found: dict[str, Any] = response.json()
        return found

    def token(self, account: str, pod: dict[str, Any] | None = None) -> str:
        spec: dict[str, Any] = {"expirationSeconds": 7200}
        if pod is not None:
            spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1",
                                      "name": pod["metadata"]["name"],
                                      "uid": pod["metadata"]["uid"]}
        found = self.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": spec})
        return str(found["status"]["token"])

    def available(self) -> bool:
        found = self.client.get("/apis/apiregistration.k8s.io/v1/apiservices/"
                                "v1.worker.gpustack.ai").json()
        return any(c.get("type") == "Available" and c.get("status") == "True"
                   for c in (found.get("status") or {}).get("conditions") or [])


def _chart(ca_pem: bytes) -> tuple[chartrbac.Chart, list[dict[str, Any]]]:
    """The chart's rendering with this run's serving CA, and what of it is applied."""
    bundle = base64.b64encode(ca_pem).decode()
    chart = chartrbac.render(sets=("apiserver.tls.mode=secret", "apiserver.tls.secretName=fleet",
                                   f"apiserver.tls.caBundle={bundle}",
                                   "apiserver.podWebhook.enabled=false"))
    return chart, [d for d in chart.docs if d["kind"] in APPLIED]


def _service(name: str, port: int, target: int) -> str:
    """A Service without a selector and its Endpoints: the aggregator routes to ``AGG_IP``."""
    metadata = {"name": name, "namespace": NAMESPACE}
    return yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Service", "metadata": metadata,
         "spec": {"ports": [{"name": "https", "port": port, "targetPort": target}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": metadata,
         "subsets": [{"addresses": [{"ip": AGG_IP}],
                      "ports": [{"name": "https", "port": target}]}]}])


def _nodes(kube: Kube, chart: chartrbac.Chart, count: int) -> list[str]:
    """``count`` Nodes, each with a plugin Pod bound to it; each Pod's bound token."""
    tokens = []
    for i in range(count):
        name = fleets.node_name(i)
        kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                      "metadata": {"name": name}})
        pod = kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"hollow-plugin-{name}", "labels": chart.plugin_labels},
            "spec": {"nodeName": name, "serviceAccountName": chart.plugin_account,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "plugin", "image": "localhost/hollow:never"}]}})
        tokens.append(kube.token(chart.plugin_account, pod))
    return tokens


def _start_server(directory: pathlib.Path, port: int, args: Sequence[str]
                  ) -> subprocess.Popen[bytes]:
    command = ["ip", "netns", "exec", "agg", sys.executable, "-m", "apiserver",
               "--data-dir", str(directory), "--port", str(port), "--bind", AGG_IP,
               "--tls-cert-file", str(directory / "serving.crt"),
               "--tls-private-key-file", str(directory / "serving.key"),
               "--kubeconfig", str(directory / "worker.kubeconfig"), "--namespace", NAMESPACE,
               *args]
    with (directory / "server.log").open("ab") as log:
        return subprocess.Popen(command, cwd=apiserver.REPO, stdout=log,
                                stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _ready(server: apiserver.RunningServer) -> bool:
    with server.client() as client:
        return client.get("/readyz").status_code == 200


def _wait(what: str, check: Any, log: pathlib.Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        with contextlib.suppress(httpx.HTTPError, OSError):
            if check():
                return
        if time.monotonic() > deadline:
            raise rig.RigError(f"{what}: not within {READY_TIMEOUT}s\n"
                               + log.read_text(errors="replace")[-4000:])
        time.sleep(0.5)


@contextlib.contextmanager
def running(base: pathlib.Path, holds: Sequence[Sequence[int]], processes: int,
            args: Sequence[str], seed: backends.Seed) -> Iterator[backends.Backend]:
    """The control plane, the chart's objects, the nodes, and the server (seeded first)."""
    cluster = rig.Rig(base / "rig")
    try:
        serving = Authority("model-manager-fleet-ca")
        chart, docs = _chart(serving.cert_pem)
        cluster.down()
        cluster.work.mkdir(parents=True)
        for script in ("unpack", "cluster-up"):
            _script(cluster, script)
        ca_file = cluster.rig / "ca.crt"
        directory = base / "api"
        directory.mkdir()
        apiservice = next(d for d in docs if d["kind"] == "APIService")["spec"]["service"]
        serving.serving((AGG_IP, f"{apiservice['name']}.{NAMESPACE}.svc")).write(
            directory, "serving")
        (directory / "ca.crt").write_bytes(serving.cert_pem)
        cluster.kubectl("create", "namespace", NAMESPACE)
        for k in range(50):
            cluster.kubectl("create", "namespace", f"tenant-{k:02d}", check=False)
        port = apiserver.free_port()
        cluster.apply(yaml.safe_dump_all(docs) + "---\n"
                      + _service(apiservice["name"], int(apiservice["port"]), port))
        with Kube(ca_file) as kube:
            tokens = _nodes(kube, chart, len(holds))
            worker = kube.token(chart.worker_account)
        kubeconfig.write(directory / "worker.kubeconfig", server="https://10.250.0.1:6443",
                                ca_file=ca_file, token=worker, user="worker")
        configs = fleets.kubeconfigs(base, [(KAS, ca_file, token) for token in tokens])
        setups, _, plugin_ca = fleets.nodes_setup(base, configs, holds, processes, worker)
        asyncio.run(seed(sqlite.Store(directory / "store.db")))
        process = _start_server(directory, port, [*args, "--plugin-ca-file", str(plugin_ca)])
        try:
            direct = apiserver.RunningServer(
                f"https://{AGG_IP}:{port}", directory, directory / "ca.crt", ADMIN_TOKEN,
                worker, cluster.kubeconfig, directory / "worker.kubeconfig", process)
            with Kube(ca_file) as kube:
                _wait("the API server ready", lambda: _ready(direct), direct.log_file)
                _wait("APIService v1.worker.gpustack.ai Available", kube.available,
                      direct.log_file)
            front = apiserver.RunningServer(KAS, directory, ca_file, ADMIN_TOKEN, worker,
                                            cluster.kubeconfig,
                                            directory / "worker.kubeconfig", process)
            prepared = fleets.Prepared([port], directory, [], setups, plugin_ca)
            yield backends.Backend([front], prepared, direct=[direct], others={
                "kube_apiserver": _pid(cluster.rig / "kas.pid"),
                "etcd": _pid(cluster.rig / "etcd.pid")})
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    finally:
        cluster.down()
