"""How the plugin reaches the API: ``kube``'s kubeconfig and in-cluster configuration (the
plugin parses none itself), checked for what the plugin relies on."""

from __future__ import annotations

import base64
import pathlib

import pytest

import kube
from kube import config

DOC = """
apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:8443/", certificate-authority: ca.crt}
- name: d
  cluster: {server: "https://other", certificate-authority-data: %s}
users:
- name: u
  user: {token: secret-token}
contexts:
- name: main
  context: {cluster: c, user: u}
- name: second
  context: {cluster: d, user: u}
"""


def test_reads_the_current_context(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(DOC % base64.b64encode(b"PEM").decode())
    conn = config.from_kubeconfig(path)
    assert conn.server.rstrip("/") == "https://127.0.0.1:8443"
    assert conn.single.abs_file(conn.single.cluster.certificate_auth) == tmp_path / "ca.crt"
    assert conn.single.user is not None and conn.single.user.token == "secret-token"
    assert "secret-token" not in repr(conn)
    other = config.from_kubeconfig(path, context="second")
    assert other.server == "https://other"
    assert base64.b64decode(other.single.cluster.certificate_auth_data or "") == b"PEM"
    assert other.single.cluster.certificate_auth is None


def test_errors_name_the_problem(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nope\ncontexts: []\n"
                    "clusters: []\nusers: []\n")
    with pytest.raises(kube.ConfigError, match="'nope' not found"):
        config.from_kubeconfig(path)
    with pytest.raises(kube.ConfigError, match=r"missing.*not found"):
        config.from_kubeconfig(tmp_path / "missing")


def test_in_cluster_needs_the_service_env_and_reads_the_projected_token(
    tmp_path: pathlib.Path,
) -> None:
    with pytest.raises(kube.ConfigError, match="KUBERNETES_SERVICE_HOST"):
        config.in_cluster(env={}, service_account_dir=tmp_path)
    (tmp_path / "token").write_text("projected\n")
    (tmp_path / "ca.crt").write_text("PEM")
    (tmp_path / "namespace").write_text("gpustack-system")
    found = config.in_cluster(
        env={"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"},
        service_account_dir=tmp_path,
    )
    assert found.server == "https://[fd00::1]:443"
    assert found.namespace == "gpustack-system"
    # The projected token is read from its file (re-read as kubelet rotates it), never kept
    # in the configuration.
    assert found.auth is not None and "projected" not in repr(found)
