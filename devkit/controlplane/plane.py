"""``ControlPlane``: the fixture kube-apiserver, a context manager for sync and async tests.

    with ControlPlane(tmp_path) as cp:
        cp.add_token("t-alice", UserInfo("alice", uid="alice-uid", groups=("tenants",)))
        cp.policy.grant("alice", Rule(("get",), ("",), ("pods",)), namespace="team-a")
        kubeconfig = cp.write_kubeconfig(tmp_path / "alice.kubeconfig", token="t-alice")
"""

from __future__ import annotations

import contextlib
import re
import ssl
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from devkit.controlplane import files, status
from devkit.controlplane import resources as kinds
from devkit.controlplane.aggregation import APIService
from devkit.controlplane.faults import Fault, Faults, Recorder
from devkit.controlplane.frontproxy import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, FrontProxy
from devkit.controlplane.identity import (
    API_AUDIENCE,
    MASTERS,
    Token,
    UserInfo,
    service_account,
)
from devkit.controlplane.pki import Authority, KeyPair
from devkit.controlplane.rbac import Policy
from devkit.controlplane.server import Server
from devkit.controlplane.store import Store
from devkit.controlplane.watch import Bookmarks
from openapi import install, volume, wire

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
ADMIN_TOKEN = "fixture-admin-token"
UNREACHABLE_KUBELET = (
    "error trying to reach service: dial tcp 10.0.0.1:10250: connect: connection refused"
)


def version_document(git_version: str) -> dict[str, str]:
    """``/version`` shaped like kube-samples/version.json for ``git_version`` (``v1.36.2``)."""
    match = re.match(r"^v(\d+)\.(\d+)", git_version)
    major, minor = (match.group(1), match.group(2)) if match else ("1", "36")
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": str(max(0, int(minor) - 1)),
        "gitVersion": git_version,
        "gitCommit": "98b35193b2ac7a23a673325f5e9b830ecd5ba406",
        "gitTreeState": "clean",
        "buildDate": "2026-12-01T08:48:12Z",
        "goVersion": "go1.26.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


class ControlPlane:
    def __init__(
        self,
        directory: Path,
        *,
        git_version: str = "v1.36.2",
        serve_selfsubjectreview: bool = True,
        api_audiences: Sequence[str] = (API_AUDIENCE,),
        bootstrap_rbac: bool = True,
        front_proxy: FrontProxy | None = None,
        namespaces: Sequence[str] = (),
        csi_driver: bool = True,
    ) -> None:
        """``csi_driver``: the CSIDriver of the node plugin exists, as the chart installs it
        (without it the worker deletes every NodeModelStore)."""
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.cluster_ca = Authority("kubernetes")
        self.client_ca = Authority("kubernetes-client-ca")
        self.serving = self.cluster_ca.serving(("127.0.0.1", "localhost"))
        self.ca_file = self.cluster_ca.write_ca(directory / "cluster-ca.crt")
        self.store = Store()
        self.policy = Policy(bootstrap=bootstrap_rbac)
        self.faults = Faults()
        self.recorder = Recorder()
        self.bookmarks = Bookmarks()
        self.front_proxy = front_proxy if front_proxy is not None else FrontProxy()
        self.git_version = git_version
        self.serve_selfsubjectreview = serve_selfsubjectreview
        self.api_audiences = tuple(api_audiences)
        self.epoch = 0
        self.closed = False
        self._tokens: dict[str, Token] = {}
        self._tokens_lock = threading.Lock()
        self._configz: dict[str, tuple[int, dict[str, Any]]] = {}
        self._api_services: list[APIService] = []
        self._server: Server | None = None
        self._port = 0
        self.add_token(ADMIN_TOKEN, UserInfo("admin", uid="admin-uid", groups=(MASTERS,)))
        for namespace in (*DEFAULT_NAMESPACES, *namespaces):
            if self.store.find(kinds.NAMESPACES, "", namespace) is None:
                self.seed(kinds.NAMESPACES, {"metadata": {"name": namespace, "labels": {
                    "kubernetes.io/metadata.name": namespace}}})  # fmt: skip
        if csi_driver:
            self.seed(kinds.CSIDRIVERS, {"metadata": {"name": volume.DRIVER},
                                         "spec": {"podInfoOnMount": True}})
        self.publish_authentication()

    # --- lifecycle -------------------------------------------------------------------

    def _tls(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.serving.load_into(context)
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=self.client_ca.cert_pem.decode())
        return context

    def start(self) -> ControlPlane:
        self._server = Server(self, self._port, self._tls())
        self._port = self._server.port
        self._server.start()
        return self

    def stop(self) -> None:
        self.closed = True
        self._bump_epoch()
        self.faults.release_all()
        self.store.close()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def _bump_epoch(self) -> None:
        with self.store.cond:
            self.epoch += 1
            self.store.cond.notify_all()

    def stopping_for(self, epoch: int) -> bool:
        return self.closed or self.epoch != epoch

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> ControlPlane:
        return self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._port}"

    def trust(self) -> ssl.SSLContext:
        """A client TLS context that trusts this control plane's serving certificate."""
        return ssl.create_default_context(cadata=self.cluster_ca.cert_pem.decode())

    def server_address(self) -> str:
        return f"127.0.0.1:{self._port}"

    # --- outages ---------------------------------------------------------------------

    @contextlib.contextmanager
    def refuse_connections(self) -> Iterator[None]:
        """Nothing listens on the port inside the block (connection refused), and live
        connections are cut; the same port serves again afterwards."""
        assert self._server is not None, "start the control plane first"
        self._bump_epoch()
        self.faults.release_all()
        self._server.stop()
        self._server = None
        try:
            yield
        finally:
            self.start()

    def hold(
        self, pattern: str, *, count: int | None = None
    ) -> contextlib.AbstractContextManager[Fault]:
        """Requests whose ``"METHOD /path"`` matches the regex wait until ``fault.release()``
        (or the block ends)."""
        return self.faults.injected(Fault(re.compile(pattern), "hold", remaining=count))

    def fail(
        self, pattern: str, code: int = 500, message: str = "injected failure",
        *, count: int | None = None,
    ) -> contextlib.AbstractContextManager[Fault]:  # fmt: skip
        return self.faults.injected(
            Fault(re.compile(pattern), "fail", code=code, message=message, remaining=count)
        )

    def drop(
        self, pattern: str, *, count: int | None = None
    ) -> contextlib.AbstractContextManager[Fault]:
        """Matching requests get their connection closed without an answer."""
        return self.faults.injected(Fault(re.compile(pattern), "drop", remaining=count))

    def request_bookmark(self) -> None:
        """Every open watch that allows bookmarks sends one now."""
        with self.store.cond:
            self.bookmarks.generation += 1
            self.store.cond.notify_all()

    # --- identities ------------------------------------------------------------------

    def add_token(
        self, token: str, user: UserInfo, *, audiences: Sequence[str] | None = None
    ) -> Token:
        """Accept ``token`` as ``user``; ``audiences`` makes it a bound token valid only for
        those (TokenReview's audience rules), None a static one."""
        entry = Token(user, None if audiences is None else tuple(audiences))
        with self._tokens_lock:
            self._tokens[token] = entry
        return entry

    def remove_token(self, token: str) -> None:
        with self._tokens_lock:
            self._tokens.pop(token, None)

    @property
    def tokens(self) -> Mapping[str, Token]:
        return self.tokens_snapshot()

    def tokens_snapshot(self) -> dict[str, Token]:
        with self._tokens_lock:
            return dict(self._tokens)

    def plugin_pod(
        self,
        node: str,
        *,
        namespace: str = install.DEFAULT_NAMESPACE,
        service_account_name: str = install.PLUGIN_SERVICE_ACCOUNT,
        pod_name: str | None = None,
        audiences: Sequence[str] = (API_AUDIENCE,),
    ) -> tuple[str, UserInfo, wire.Obj]:
        """A Pod of ``service_account_name`` bound to ``node`` (the Node created if missing) and
        a bound token for it with the pod/node extras, as kubelet would project it.
        Returns (token, user, pod)."""
        node_obj = self.get(kinds.NODES, node) or self.seed(
            kinds.NODES, {"metadata": {"name": node}}
        )
        name = pod_name or f"plugin-{node}"
        pod = self.seed(kinds.PODS, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "serviceAccountName": service_account_name,
                     "serviceAccount": service_account_name,
                     "containers": [{"name": "plugin", "image": "registry.invalid/plugin"}]},
            "status": {"phase": "Running"},
        })  # fmt: skip
        user = service_account(
            namespace, service_account_name,
            uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{service_account_name}")),
            pod=(name, pod["metadata"]["uid"]), node=(node, node_obj["metadata"]["uid"]),
            credential_id=str(uuid.uuid4()),
        )  # fmt: skip
        token = f"bound-{name}-{uuid.uuid4().hex[:8]}"
        self.add_token(token, user, audiences=audiences)
        return token, user, pod

    def write_service_account(
        self, directory: Path, token: str, namespace: str = install.DEFAULT_NAMESPACE
    ) -> dict[str, str]:
        """An in-cluster ServiceAccount directory (token, ca.crt, namespace) for this control
        plane; returns the ``KUBERNETES_SERVICE_*`` environment that goes with it. Call it again
        to rotate the token (written to a new file that replaces the old, as kubelet does)."""
        files.write_service_account(directory, token, self.cluster_ca.cert_pem, namespace)
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.port)}

    def issue_client_cert(self, user: str, groups: Sequence[str] = ()) -> KeyPair:
        """A client certificate the control plane accepts as ``user`` in ``groups``."""
        return self.client_ca.client(user, groups)

    def write_kubeconfig(
        self,
        path: Path,
        *,
        token: str | None = None,
        token_file: Path | None = None,
        client: KeyPair | None = None,
        exec_command: Sequence[str] | None = None,
        exec_api_version: str = "client.authentication.k8s.io/v1",
        embed_ca: bool = True,
        namespace: str | None = None,
    ) -> Path:
        """A kubeconfig for this control plane with one credential (``files.write_kubeconfig``)."""
        return files.write_kubeconfig(
            path, server=self.url, ca_pem=self.cluster_ca.cert_pem, ca_file=self.ca_file,
            token=token, token_file=token_file, client=client, exec_command=exec_command,
            exec_api_version=exec_api_version, embed_ca=embed_ca, namespace=namespace,
        )  # fmt: skip

    # --- objects ---------------------------------------------------------------------

    def seed(self, kind: kinds.Kind, obj: wire.Obj) -> wire.Obj:
        """Store ``obj`` as is (uid, creationTimestamp and status kept when present; its
        namespace created if missing), as if it had been there all along."""
        namespace = str(obj.get("metadata", {}).get("namespace", "")) if kind.namespaced else ""
        return self.store.create(kind, namespace, obj, seed=True)

    def get(self, kind: kinds.Kind, name: str, namespace: str = "") -> wire.Obj | None:
        return self.store.find(kind, namespace if kind.namespaced else "", name)

    def put(self, kind: kinds.Kind, obj: wire.Obj) -> wire.Obj:
        """Create or overwrite (unconditionally) as the cluster's own components would."""
        meta = obj.get("metadata", {})
        namespace = str(meta.get("namespace", "")) if kind.namespaced else ""
        name = str(meta.get("name", ""))
        if self.store.find(kind, namespace, name) is None:
            return self.seed(kind, obj)
        body = dict(obj)
        body["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
        updated = self.store.update(kind, namespace, name, body)
        if kind.has_status and "status" in obj:
            updated = self.store.update(kind, namespace, name, body, subresource="status")
        return updated

    def publish_authentication(self) -> wire.Obj:
        """(Re)write ``kube-system/extension-apiserver-authentication`` from the client CA and
        the front proxy, as kube-apiserver does at start and on rotation."""
        data = self.front_proxy.configmap_data(self.client_ca.cert_pem)
        return self.put(kinds.CONFIGMAPS, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE},
            "data": data,
        })  # fmt: skip

    def set_configz(self, node: str, kubelet_config: Mapping[str, Any]) -> None:
        """``GET /api/v1/nodes/{node}/proxy/configz`` answers ``{"kubeletconfig": ...}``."""
        self._configz[node] = (200, {"kubeletconfig": dict(kubelet_config)})

    def set_configz_error(self, node: str, code: int = 503, message: str | None = None) -> None:
        text = message or UNREACHABLE_KUBELET
        reason = "ServiceUnavailable" if code == 503 else "InternalError"
        self._configz[node] = (code, status.status(code, reason, text))

    def configz_for(self, node: str) -> tuple[int, dict[str, Any]]:
        if node in self._configz:
            return self._configz[node]
        return 503, status.service_unavailable(UNREACHABLE_KUBELET)

    def register_api_service(self, group: str, version: str, url: str,
                             ca_bundle: bytes) -> APIService:
        """``APIService v1.<group>``: requests for ``/apis/<group>`` are authenticated and
        authorized here, then proxied to ``url`` with the front-proxy certificate and the
        caller's identity in ``X-Remote-*`` headers, as kube-aggregator does."""
        service = APIService(group, version, url.rstrip("/"), ca_bundle)
        self._api_services = [s for s in self._api_services if s.group != group] + [service]
        return service

    def api_service_for(self, path: str) -> APIService | None:
        return next((s for s in self._api_services if s.serves(path)), None)

    def api_services(self) -> list[APIService]:
        return list(self._api_services)

    def aggregated_groups(self) -> dict[str, str]:
        return {s.group: s.version for s in self._api_services}

    def version_info(self) -> dict[str, str]:
        return version_document(self.git_version)
