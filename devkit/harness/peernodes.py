"""Node plugins as processes in a cluster, for node-to-node sync (tests and ``bench.peer_fanout``).

``Cluster`` is what a cluster gives the plugins: the fixture control plane (in this process, on
its own threads) holding the chart's rendered RBAC and answering TokenReviews, with the real API
server in cluster mode behind it as the APIService of ``worker.gpustack.ai`` (so one kubeconfig
per plugin reaches both, as in-cluster config does), every node's NodeModelStore stored before the
server starts (no client may create one), and an artifact resolved as the resolver would.

``Node`` is one ``python -m nodeplugin`` as the plugin Pod of a node: its Pod-bound token, its
HTTPS port, and with sync on ``--peer-port``, ``--peer-user`` and a token for the peer audience
(no ``--peer-address``: the plugins find each other in their stores' ``status.peer.url``). It is
asked to hold the artifact as the worker asks a standalone node (``POST /model/prefetches``, the
worker's token for the plugins' audience): the node cache's ordinary path, the one a mount takes.

The plugin's read-only view of its cache is a bind mount: root only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from devkit import chartrbac
from devkit.controlplane import ADMIN_TOKEN, ControlPlane, resources
from devkit.harness import clustermode
from devkit.harness.apiserver import PLUGIN_USER, REPO, free_port
from nodeplugin.cache import fsutil, refs
from nodeplugin.peer import wire
from openapi import anchors, install, reasons, sources, states
from openapi import plugin as plugin_api
from openapi import resources as contract
from openapi.kinds import modelartifact, nodemodelstore

GROUP = f"/apis/{contract.GROUP_VERSION}"
PLUGIN_NS = install.DEFAULT_NAMESPACE
NAMESPACE = "team-a"
POLL = 0.05
PEER_AUDIENCE = wire.AUDIENCE


def seed_stores(data_dir: pathlib.Path, specs: Mapping[str, Mapping[str, Any]]) -> None:
    """``node -> spec`` as NodeModelStores, stored before the server starts."""
    from apiserver.registry import build
    from apiserver.storage import sqlite
    from devkit import admitting

    async def seed() -> None:
        store = sqlite.Store(data_dir / "store.db")
        await store.start()
        try:
            registry = build.build(store, admission=admitting.standalone())
            for node, spec in specs.items():
                await registry.nodemodelstores.create({"metadata": {"name": node},
                                                       "spec": dict(spec)})
        finally:
            await store.close()

    data_dir.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a caller's loop may be running
        pool.submit(asyncio.run, seed()).result()


class Cluster:
    def __init__(self, stack: contextlib.ExitStack, base: pathlib.Path,
                 specs: Mapping[str, Mapping[str, Any]],
                 namespaces: Sequence[str] = (NAMESPACE,)) -> None:
        self.base = base
        self.cp = stack.enter_context(ControlPlane(base / "cp", namespaces=namespaces))
        clustermode.prepare(self.cp)
        chartrbac.render(sets=("modelManager.peerSync.enabled=true",)).apply(self.cp)
        seed_stores(base / "server", specs)
        self.server = stack.enter_context(clustermode.running(self.cp, base / "server"))
        self.cp.register_api_service(contract.GROUP, contract.VERSION, self.server.url,
                                     self.server.ca_pem)
        self.worker = clustermode.WORKER.name
        self.worker_token = clustermode.WORKER_TOKEN
        self.plugin_token = clustermode.PLUGIN_AUDIENCE_TOKEN
        """What the worker sends to a plugin's HTTPS port (its API token is refused there)."""
        self.admin = stack.enter_context(self.client(ADMIN_TOKEN))
        self.artifact = ""
        self.uid = ""
        self.digest = ""

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.cp.url, verify=self.cp.trust(), timeout=30,
                            headers={"authorization": f"Bearer {token}"})

    def resolve(self, name: str, repository: str, *, revision: str, digest: str,
                file_count: int, size: int) -> str:
        """Create the artifact and write its status as the resolver (the worker) would;
        returns its UID. Nodes are then asked for it."""
        body = {"apiVersion": contract.GROUP_VERSION, "kind": contract.MODEL_ARTIFACT.kind,
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"source": {sources.HUGGING_FACE: {"repository": repository}}}}
        created = self.admin.post(f"{GROUP}/namespaces/{NAMESPACE}/modelartifacts", json=body)
        created.raise_for_status()
        obj = created.json()
        obj["status"] = {
            "resolved": modelartifact.Resolved(
                revision=revision, manifestDigest=digest, digestSource=anchors.DIGEST_FROM_HUB,
                fileCount=file_count, sizeBytes=size),
            "conditions": [{"type": reasons.RESOLVED, "status": "True", "reason": reasons.RESOLVED,
                            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        }
        with self.client(self.worker_token) as worker:
            path = f"{GROUP}/namespaces/{NAMESPACE}/modelartifacts/{name}/status"
            worker.put(path, json=obj).raise_for_status()
        self.artifact, self.uid, self.digest = name, str(obj["metadata"]["uid"]), digest
        return self.uid

    def hub_ca(self, name: str, pem: str) -> None:
        """The ConfigMap a store's ``spec.hub.caBundleConfigMap`` names, in the plugins'
        namespace (``ca.crt``)."""
        self.cp.seed(resources.CONFIGMAPS, {"metadata": {"name": name, "namespace": PLUGIN_NS},
                                            "data": {install.CA_BUNDLE_KEY: pem}})

    def store(self, node: str) -> dict[str, Any]:
        answer = self.admin.get(f"{GROUP}/nodemodelstores/{node}")
        answer.raise_for_status()
        found: dict[str, Any] = answer.json()
        return found

    def model(self, node: str) -> dict[str, Any] | None:
        """The node store's entry for the artifact's digest."""
        for entry in nodemodelstore.models(self.store(node)):
            if nodemodelstore.entry_digest(entry) == self.digest:
                return dict(entry)
        return None


class Node:
    def __init__(self, cluster: Cluster, name: str, hub_endpoint: str, *, peer: bool,
                 extra_args: Sequence[str] = ()) -> None:
        self.cluster, self.name, self.peer = cluster, name, peer
        self.dir = cluster.base / "nodes" / name
        (self.dir / "kubelet").mkdir(parents=True)
        token, user, _ = cluster.cp.plugin_pod(name, namespace=PLUGIN_NS)
        kubeconfig = cluster.cp.write_kubeconfig(self.dir / "kubeconfig", token=token)
        self.port = free_port()
        self.peer_token = f"peer-{token}"
        command = [
            sys.executable, "-m", "nodeplugin", "--node-name", name,
            "--endpoint", f"unix://{self.dir}/csi.sock", "--root", str(self.root),
            "--kubelet-dir", str(self.dir / "kubelet"), "--kubeconfig", str(kubeconfig),
            "--namespace", PLUGIN_NS, "--secure-port", str(self.port),
            "--bind-address", "127.0.0.1", "--worker-user", cluster.worker,
            "--huggingface-endpoint", hub_endpoint, "--log-level", "INFO", *extra_args,
        ]  # fmt: skip
        self.peer_port = 0
        if peer:
            cluster.cp.add_token(self.peer_token, user, audiences=[PEER_AUDIENCE])
            (self.dir / "peer-token").write_text(self.peer_token + "\n")
            self.peer_port = free_port()
            command += ["--peer-port", str(self.peer_port), "--peer-user", PLUGIN_USER,
                        "--peer-token-file", str(self.dir / "peer-token"),
                        "--peer-advertise-address", "127.0.0.1"]
        with (self.dir / "plugin.log").open("ab") as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log,
                                            stderr=subprocess.STDOUT)
        self.http = httpx.Client(base_url=f"https://127.0.0.1:{self.port}", verify=False,
                                 timeout=30, headers={
                                     "authorization": f"Bearer {cluster.plugin_token}"})

    @property
    def root(self) -> pathlib.Path:
        return self.dir / "cache"

    def log(self) -> str:
        return (self.dir / "plugin.log").read_text(errors="replace")

    def wait_serving(self, timeout: float = 90.0) -> None:
        """``/readyz`` (the artifacts are listed) and the store Ready, the spec applied (and,
        with sync on, the peer port published)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log()[-4000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if self.http.get("/readyz").status_code == 200 and self._store_ready():
                    return
            time.sleep(POLL)
        raise RuntimeError(f"{self.name} not serving in {timeout}s:\n{self.log()[-4000:]}")

    def _store_ready(self) -> bool:
        store = self.cluster.store(self.name)
        return nodemodelstore.ready(store) and (
            not self.peer or bool(nodemodelstore.peer_url(store)))

    def ask(self) -> dict[str, Any]:
        """One ``POST /model/prefetches`` for the cluster's artifact: the materialization's
        state (``Published``, ``Downloading`` with bytes, ``Failed`` with the reason)."""
        answer = self.http.post(plugin_api.PREFETCHES, json=plugin_api.prefetch_request(
            NAMESPACE, self.cluster.artifact, self.cluster.uid, self.cluster.digest))
        if answer.status_code == 503:  # the artifacts not listed yet
            return {"state": states.DOWNLOADING, "downloadedBytes": 0}
        answer.raise_for_status()
        body: dict[str, Any] = answer.json()
        if plugin_api.answer_state(body) == states.FAILED:
            raise RuntimeError(f"{self.name}: {body}\n{self.log()[-4000:]}")
        return body

    def source(self, timeout: float = 10.0) -> str:
        """``status.models[].source`` of the digest, once the store reports it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            entry = self.cluster.model(self.name)
            if entry is not None and nodemodelstore.entry_state(entry) == states.READY \
                    and entry.get("source"):
                return str(entry["source"])
            time.sleep(POLL)
        return "unreported"

    def downloaded(self) -> dict[str, float]:
        """The download bytes counter by its ``source`` label, from ``/metrics``."""
        text = self.http.get("/metrics").text
        found: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("gpustack_model_manager_download_bytes_total{"):
                labels, _, value = line.partition("} ")
                found[labels.split('source="')[1].split('"')[0]] = float(value)
        return found

    def tree(self, digest: str) -> pathlib.Path:
        return self.root / "objects" / "sha256" / digest.removeprefix("sha256:")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(15)

    def stop(self, *, remove: bool = True) -> None:
        """SIGTERM (the plugin clears its published peer URL), unmount its view, remove it."""
        self.http.close()
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(15)
        self.kill()  # what SIGTERM did not end in time (else it only reaps)
        unmount_under(self.dir)
        if remove:
            fsutil.remove_tree(self.dir)


def unmount_under(directory: pathlib.Path) -> None:
    """Lazily unmount whatever is mounted below ``directory`` (the plugin's read-only view)."""
    prefix = str(directory.resolve()) + "/"
    points = [m.mount_point for m in refs.parse_mountinfo(refs.read_mountinfo())
              if m.mount_point.startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def publish(nodes: Sequence[Node], timeout: float = 300.0) -> list[float]:
    """Ask every node at once, each again every POLL until Published; seconds to each one."""
    started = time.monotonic()
    done: dict[str, float] = {}
    while len(done) < len(nodes):
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"not published in {timeout}s: only {sorted(done)}")
        for node in nodes:
            if node.name not in done and plugin_api.answer_state(node.ask()) == states.PUBLISHED:
                done[node.name] = time.monotonic() - started
        time.sleep(POLL)
    return [done[n.name] for n in nodes]
