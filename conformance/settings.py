"""What the suite was asked to check, shared by the command line and the pytest plugin."""

from __future__ import annotations

import dataclasses
import pathlib


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    kubeconfig: pathlib.Path
    context: str | None = None
    namespace_prefix: str = "conformance"
    tenant_kubeconfig: pathlib.Path | None = None
    tenant_namespace: str | None = None
    get_only_user: str | None = None
    """A user granted only ``get`` on ``modelartifacts`` in ``tenant_namespace``; the suite
    impersonates it with the admin kubeconfig."""
    kubectl: str = "kubectl"
    timeout: float = 30.0
    """Seconds for one request, and the bound on every wait the suite does."""
