"""The server's settings: one frozen value built by the CLI and read by everything else."""

from __future__ import annotations

import dataclasses
import pathlib

from apiserver.storage.etcd import client as etcd_client
from controllers import config as controller_settings
from openapi import install, jsondepth

DEFAULT_WORKER_USER = install.WORKER_USER
DEFAULT_NAMESPACE = install.DEFAULT_NAMESPACE
DEFAULT_PLUGIN_SERVICE_ACCOUNT = install.PLUGIN_SERVICE_ACCOUNT
DEFAULT_PORT = 8443
DEFAULT_BIND = "127.0.0.1"
CONTROLLER_MODES = ("embedded", "external", "none")
MAX_BODY_BYTES = 3 * 1024 * 1024
"""Request bodies larger than this get 413 (the same limit kube-apiserver applies); so do YAML
bodies whose aliases expand past it and patches whose result would."""
MAX_BODY_DEPTH = jsondepth.MAX_DEPTH
"""Objects and lists nested deeper than this in a body get 400 (the node plugin's bodies too)."""
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEFAULT_WEBHOOK_CACHE_TTL = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeaderFlags:
    """``--requestheader-*``. With the CA file the front-proxy configuration comes from these
    (kube's defaults for the names not given); without it from the ConfigMap, and each name given
    here replaces the ConfigMap's. None: not given."""

    client_ca_file: pathlib.Path | None = None
    allowed_names: tuple[str, ...] | None = None
    username_headers: tuple[str, ...] | None = None
    uid_headers: tuple[str, ...] | None = None
    group_headers: tuple[str, ...] | None = None
    extra_headers_prefix: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Delegation:
    """Cluster mode: who authenticates and authorizes requests (kube-apiserver, delegated)."""

    kubeconfig: pathlib.Path | None = None
    """The server's own client (the worker identity): Pods, /version, SelfSubjectReview.
    None: in-cluster configuration."""
    authentication_kubeconfig: pathlib.Path | None = None
    """TokenReview and the extension-apiserver-authentication ConfigMap (default: kubeconfig)."""
    authorization_kubeconfig: pathlib.Path | None = None
    """SubjectAccessReview (default: kubeconfig)."""
    client_ca_file: pathlib.Path | None = None
    request_header: RequestHeaderFlags = dataclasses.field(default_factory=RequestHeaderFlags)
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    api_audiences: tuple[str, ...] = ()
    token_cache_ttl: float = DEFAULT_WEBHOOK_CACHE_TTL
    authorized_cache_ttl: float = DEFAULT_WEBHOOK_CACHE_TTL
    unauthorized_cache_ttl: float = DEFAULT_WEBHOOK_CACHE_TTL

    def authentication_config(self) -> pathlib.Path | None:
        return self.authentication_kubeconfig or self.kubeconfig

    def authorization_config(self) -> pathlib.Path | None:
        return self.authorization_kubeconfig or self.kubeconfig


@dataclasses.dataclass(frozen=True, slots=True)
class StorageSettings:
    """Where objects live (``flags.storage`` documents each)."""

    etcd: etcd_client.Config | None = None
    """On etcd: the client's endpoints, TLS files, key prefix and deadlines (their defaults are
    the client's); None on SQLite."""
    etcd_compaction_interval: float = 300.0
    processes: int = 1
    """Server processes sharing one listening socket (``--processes``; on SQLite they share
    the one file)."""

    @property
    def backend(self) -> str:
        """``sqlite`` or ``etcd``."""
        return "sqlite" if self.etcd is None else "etcd"


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    data_dir: pathlib.Path
    """SQLite lives at ``data_dir/store.db``; standalone mode keeps certs, tokens and kubeconfigs
    here too."""
    tls_cert_file: pathlib.Path
    tls_private_key_file: pathlib.Path
    token_auth_file: pathlib.Path | None = None
    """Static tokens: always in standalone mode; optional, beside TokenReview, in a cluster."""
    bind: str = DEFAULT_BIND
    port: int = DEFAULT_PORT
    standalone: bool = False
    worker_username: str = DEFAULT_WORKER_USER
    """Standalone mode's worker identity; in a cluster, where it is learned from kube-apiserver,
    the name it must have when given (empty: whatever is learned)."""
    namespace: str = DEFAULT_NAMESPACE
    plugin_namespace: str = DEFAULT_NAMESPACE
    plugin_service_account: str = DEFAULT_PLUGIN_SERVICE_ACCOUNT
    plugin_node: str = "local"
    """Standalone mode: the node the local node-plugin identity is bound to."""
    policy_file: pathlib.Path | None = None
    """Standalone mode: the operator's RBAC documents (default DATA_DIR/policy.yaml)."""
    delegation: Delegation = dataclasses.field(default_factory=Delegation)
    tls_sans: tuple[str, ...] = ()
    nodes: tuple[tuple[str, str], ...] = ()
    """Standalone ``--node NAME[=URL]``: (name, its plugin's https URL or "")."""
    controllers: str = "embedded"
    """``embedded`` (run them here), ``external`` (``python -m controllers``), ``none``."""
    controller_settings: controller_settings.Settings = dataclasses.field(
        default_factory=controller_settings.Settings)
    shutdown_timeout: float = 5.0
    """Seconds open requests (watches) get to finish after SIGTERM/SIGINT."""
    log_level: str = "INFO"
    storage: StorageSettings = StorageSettings()
    renamed_flags: tuple[str, ...] = ()
    """A warning per old flag name given (``--workers`` for ``--processes``), logged at start."""

    @property
    def storage_path(self) -> pathlib.Path:
        return self.data_dir / "store.db"

    @property
    def plugin_username(self) -> str:
        return (f"system:serviceaccount:{self.plugin_namespace}:"
                f"{self.plugin_service_account}")

    @property
    def advertised_host(self) -> str:
        """The host a kubeconfig should name: loopback when bound to every address."""
        if self.bind in ("0.0.0.0", ""):
            return "127.0.0.1"
        if self.bind == "::":
            return "::1"
        return self.bind

    @property
    def url(self) -> str:
        host = self.advertised_host
        if ":" in host:
            host = f"[{host}]"
        return f"https://{host}:{self.port}"
