"""The server's settings: one frozen value built by the CLI and read by everything else."""

from __future__ import annotations

import dataclasses
import pathlib

from controllers import settings as controller_settings

DEFAULT_WORKER_USER = "system:serviceaccount:gpustack-system:model-manager-worker"
DEFAULT_PORT = 8443
DEFAULT_BIND = "127.0.0.1"
CONTROLLER_MODES = ("embedded", "external", "none")
MAX_BODY_BYTES = 3 * 1024 * 1024
"""Request bodies larger than this get 413 (the same limit kube-apiserver applies); so do YAML
bodies whose aliases expand past it and patches whose result would."""
MAX_BODY_DEPTH = 64
"""Objects and lists nested deeper than this in a body get 400: far deeper than any object of
this API, well inside what the encoders (orjson: 255) and the validators handle."""


@dataclasses.dataclass(frozen=True, slots=True)
class StorageSettings:
    """Where objects live (``storage_flags`` documents each)."""

    backend: str = "sqlite"
    """``sqlite`` or ``etcd``."""
    etcd_servers: tuple[str, ...] = ()
    etcd_cafile: pathlib.Path | None = None
    etcd_certfile: pathlib.Path | None = None
    etcd_keyfile: pathlib.Path | None = None
    etcd_prefix: str = "/gpustack"
    etcd_compaction_interval: float = 300.0
    etcd_request_timeout: float = 10.0
    etcd_healthcheck_timeout: float = 2.0
    workers: int = 1
    """Server processes sharing one listening socket (above 1 only on etcd)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    data_dir: pathlib.Path
    """SQLite lives at ``data_dir/store.db``; standalone mode keeps certs, tokens and kubeconfigs
    here too."""
    tls_cert_file: pathlib.Path
    tls_private_key_file: pathlib.Path
    token_auth_file: pathlib.Path
    bind: str = DEFAULT_BIND
    port: int = DEFAULT_PORT
    standalone: bool = False
    worker_username: str = DEFAULT_WORKER_USER
    tls_sans: tuple[str, ...] = ()
    seed_nodemodelstores: tuple[str, ...] = ()
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

    @property
    def storage_path(self) -> pathlib.Path:
        return self.data_dir / "store.db"

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
