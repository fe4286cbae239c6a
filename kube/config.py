"""Where a client's cluster and credential come from: a kubeconfig file or the Pod it runs in.

Parsing and TLS are lightkube's (``KubeConfig`` reads the file; ``client_adapter`` builds the
httpx2 client with the CA, the client certificate and ``insecure-skip-tls-verify``). This module
only picks the context and decides which credential object the client uses: lightkube's for a
static token or a client certificate, ``kube.auth``'s for a token file and an exec plugin.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping

import httpx2
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User
from lightkube.core import exceptions as lightkube_errors

from kube.auth import ExecCredentialAuth, ExecSpec, TokenFileAuth
from kube.errors import ConfigError

SERVICE_ACCOUNT_DIR = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterConfig:
    """One chosen context: lightkube's view of it plus the credential we install ourselves.

    ``auth`` is None when lightkube's own credential handling is right (a static token, a
    client certificate, basic auth or nothing).
    """

    single: SingleConfig = dataclasses.field(repr=False)
    """lightkube's view; kept out of ``repr``, which would show a static token."""
    auth: httpx2.Auth | None = dataclasses.field(repr=False)
    source: str

    @property
    def server(self) -> str:
        return self.single.cluster.server

    @property
    def namespace(self) -> str:
        return self.single.namespace


def _auth_for(user: User | None, config: SingleConfig) -> httpx2.Auth | None:
    if user is None:
        return None
    if user.token_file is not None:
        return TokenFileAuth(config.abs_file(user.token_file))
    if user.token is not None:
        return None
    if user.exec is not None:
        spec = user.exec
        return ExecCredentialAuth(
            ExecSpec(
                api_version=spec.apiVersion,
                command=spec.command,
                args=tuple(spec.args or ()),
                env={item.name: item.value for item in spec.env or ()},
            )
        )
    if user.auth_provider is not None:
        raise ConfigError("kubeconfig auth-provider plugins are not supported; use exec")
    return None


def from_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> ClusterConfig:
    """The context ``context`` (default: current-context) of the kubeconfig at ``path``."""
    try:
        kubeconfig = KubeConfig.from_file(path)
        single = kubeconfig.get(context)
    except lightkube_errors.ConfigError as exc:
        raise ConfigError(f"kubeconfig {os.fspath(path)}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"kubeconfig {os.fspath(path)} is malformed: {exc!r}") from None
    if single is None:
        raise ConfigError(f"kubeconfig {os.fspath(path)} has no usable context")
    if not single.cluster.server.startswith(("https://", "http://")):
        raise ConfigError(f"kubeconfig {os.fspath(path)}: cluster server is not an http(s) URL")
    return ClusterConfig(
        single=single,
        auth=_auth_for(single.user, single),
        source=f"kubeconfig {os.fspath(path)}",
    )


def from_url(server: str, *, token: str | None = None, ca_file: str | None = None,
             ca_data: str | None = None, namespace: str = "default") -> ClusterConfig:
    """A server URL with an optional bearer token and CA (a file, or base64 PEM data), as a
    client reaches a cluster through its own proxy (the GPUStack server does). Without a CA the
    system's trust store verifies the server."""
    if not server.startswith(("https://", "http://")):
        raise ConfigError("the server is not an http(s) URL")
    cluster: dict[str, str] = {"server": server}
    if ca_file:
        cluster["certificate-authority"] = os.path.abspath(ca_file)
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    user: dict[str, str] = {"token": token} if token else {}
    try:
        single = KubeConfig.from_dict({
            "clusters": [{"name": "c", "cluster": cluster}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u",
                                                   "namespace": namespace}}],
            "current-context": "x",
        }).get()
    except (lightkube_errors.ConfigError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"server {server}: {exc!r}") from None
    if single is None:
        raise ConfigError(f"server {server}: no usable configuration")
    return ClusterConfig(single=single, auth=None, source=f"server {server}")


def in_cluster(
    *,
    env: Mapping[str, str] | None = None,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
) -> ClusterConfig:
    """The Pod's own identity: the projected token (re-read as it rotates), the cluster CA and
    ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``."""
    environ = os.environ if env is None else env
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset"
        )
    directory = pathlib.Path(service_account_dir)
    token = directory / "token"
    ca = directory / "ca.crt"
    for required in (token, ca):
        if not required.is_file():
            raise ConfigError(f"in-cluster configuration: {required} is missing")
    try:
        namespace = (directory / "namespace").read_text(encoding="utf-8").strip() or None
    except OSError:
        namespace = None
    if ":" in host:
        host = f"[{host}]"
    kubeconfig = KubeConfig.from_one(
        cluster=Cluster(server=f"https://{host}:{port}", certificate_auth=str(ca)),
        user=User(token_file=str(token)),
        namespace=namespace,
    )
    single = kubeconfig.get()
    assert single is not None
    return ClusterConfig(single=single, auth=TokenFileAuth(token), source="in-cluster")


def from_env(
    kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None
) -> ClusterConfig:
    """kubectl's order: an explicit kubeconfig, else in-cluster, else ``$KUBECONFIG``, else
    ``~/.kube/config``."""
    if kubeconfig:
        return from_kubeconfig(kubeconfig, context)
    try:
        return in_cluster()
    except ConfigError:
        pass
    path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
    return from_kubeconfig(os.path.expanduser(path), context)
