"""Client-side files for the fixture control plane: kubeconfigs (kubeadm's layout) and
in-cluster ServiceAccount directories."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from devkit.controlplane.pki import KeyPair


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    ca_file: Path,
    token: str | None = None,
    token_file: Path | None = None,
    client: KeyPair | None = None,
    exec_command: Sequence[str] | None = None,
    exec_api_version: str = "client.authentication.k8s.io/v1",
    embed_ca: bool = True,
    namespace: str | None = None,
) -> Path:
    """A kubeconfig with one credential (CA and client certificate embedded as base64 data,
    as kubeadm writes them)."""
    user: dict[str, Any] = {}
    if token is not None:
        user["token"] = token
    if token_file is not None:
        user["tokenFile"] = str(token_file)
    if client is not None:
        user["client-certificate-data"] = base64.b64encode(client.cert_pem).decode()
        user["client-key-data"] = base64.b64encode(client.key_pem).decode()
    if exec_command is not None:
        user["exec"] = {
            "apiVersion": exec_api_version,
            "command": exec_command[0],
            "args": list(exec_command[1:]),
            "interactiveMode": "Never",
        }
    cluster: dict[str, Any] = {"server": server}
    if embed_ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    else:
        cluster["certificate-authority"] = str(ca_file)
    context: dict[str, Any] = {"cluster": "fixture", "user": "fixture"}
    if namespace:
        context["namespace"] = namespace
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fixture", "cluster": cluster}],
        "users": [{"name": "fixture", "user": user}],
        "contexts": [{"name": "fixture", "context": context}],
        "current-context": "fixture",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


def write_service_account(directory: Path, token: str, ca_pem: bytes, namespace: str) -> None:
    """token, ca.crt and namespace as kubelet projects them; the token lands in a new file that
    replaces the old one atomically (so calling it again is a rotation)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.crt").write_bytes(ca_pem)
    (directory / "namespace").write_text(namespace)
    staged = directory / ".token.new"
    staged.write_text(token)
    staged.replace(directory / "token")
