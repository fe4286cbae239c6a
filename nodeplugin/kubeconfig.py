"""How the plugin reaches the API: a kubeconfig file or the in-cluster service account.

Only what a client needs is read: the server URL, the CA, and a bearer token or a client
certificate. The token is kept on the ``Connection`` (``repr`` hides it) and only ever placed in an
``Authorization`` header.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import pathlib
import ssl
from collections.abc import Generator
from typing import Any

import httpx
import yaml

IN_CLUSTER_DIR = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(ValueError):
    """The kubeconfig or in-cluster environment cannot be used."""


@dataclasses.dataclass(frozen=True, slots=True)
class Connection:
    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    token: str | None = dataclasses.field(default=None, repr=False)
    token_file: str | None = None
    """Re-read on every client build: in-cluster tokens rotate."""
    client_cert_file: str | None = None
    client_key_file: str | None = None
    insecure: bool = False

    def bearer(self) -> str | None:
        if self.token_file:
            return pathlib.Path(self.token_file).read_text().strip()
        return self.token

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.ca_data is not None:
            ctx.load_verify_locations(cadata=self.ca_data.decode())
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert_file:
            ctx.load_cert_chain(self.client_cert_file, self.client_key_file)
        return ctx

    def http_client(
        self, *, timeout: httpx.Timeout, transport: httpx.AsyncBaseTransport | None = None
    ) -> httpx.AsyncClient:
        """A client for the API; ``transport`` replaces the network (tests)."""
        headers = {"Accept": "application/json", "User-Agent": "model-manager-nodeplugin"}
        return httpx.AsyncClient(
            base_url=self.server,
            verify=self.ssl_context() if transport is None else True,
            transport=transport,
            headers=headers,
            timeout=timeout,
            auth=_BearerAuth(self),
        )


class _BearerAuth(httpx.Auth):
    """Adds the bearer token per request, re-reading a token file (kubelet rotates it)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._connection.bearer()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


def load(path: str | os.PathLike[str], *, context: str | None = None) -> Connection:
    """Read the current (or named) context of a kubeconfig file."""
    path = pathlib.Path(path)
    try:
        doc: Any = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path} is not a mapping")
    name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), name, "context", path).get("context") or {}
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster", path).get("cluster") or {}
    user = _named(doc.get("users"), ctx.get("user"), "user", path).get("user") or {}
    server = cluster.get("server")
    if not server:
        raise ConfigError(f"kubeconfig {path}: cluster has no server")
    base = path.parent
    return Connection(
        server=str(server).rstrip("/"),
        ca_file=_file(base, cluster.get("certificate-authority")),
        ca_data=_b64(cluster.get("certificate-authority-data")),
        token=user.get("token"),
        token_file=_file(base, user.get("tokenFile")),
        client_cert_file=_file(base, user.get("client-certificate")),
        client_key_file=_file(base, user.get("client-key")),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
    )


def in_cluster() -> Connection:
    """The Pod's service account (KUBERNETES_SERVICE_HOST/PORT, token and ca.crt)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigError("not in a cluster (KUBERNETES_SERVICE_HOST unset); pass --kubeconfig")
    if ":" in host:
        host = f"[{host}]"
    return Connection(
        server=f"https://{host}:{port}",
        ca_file=str(IN_CLUSTER_DIR / "ca.crt"),
        token_file=str(IN_CLUSTER_DIR / "token"),
    )


def _named(items: Any, name: Any, kind: str, path: pathlib.Path) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    raise ConfigError(f"kubeconfig {path}: no {kind} named {name!r}")


def _file(base: pathlib.Path, value: Any) -> str | None:
    if not value:
        return None
    return str(base / str(value))


def _b64(value: Any) -> bytes | None:
    return base64.b64decode(value) if value else None
