"""Write a kubeconfig that trusts a CA and authenticates with a bearer token."""

from __future__ import annotations

import base64
import pathlib
from typing import Any

import yaml

from durable import disk


def render(*, server: str, ca_pem: bytes, token: str, user: str, context: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
        "current-context": context,
        "preferences": {},
    }


def write(
    path: pathlib.Path,
    *,
    server: str,
    ca_file: pathlib.Path,
    token: str,
    user: str,
    context: str = "model-manager",
) -> None:
    """Write atomically with mode 0600: the file holds a credential."""
    document = render(server=server, ca_pem=ca_file.read_bytes(), token=token, user=user,
                      context=context)  # fmt: skip
    disk.write_atomic(path, yaml.safe_dump(document, sort_keys=False).encode())
