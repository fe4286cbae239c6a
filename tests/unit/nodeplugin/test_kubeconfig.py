from __future__ import annotations

import base64
import pathlib

import pytest

from nodeplugin import kubeconfig

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
    conn = kubeconfig.load(path)
    assert conn.server == "https://127.0.0.1:8443"
    assert conn.ca_file == str(tmp_path / "ca.crt")
    assert conn.bearer() == "secret-token"
    assert "secret-token" not in repr(conn)
    other = kubeconfig.load(path, context="second")
    assert other.ca_data == b"PEM" and other.ca_file is None


def test_errors_name_the_problem(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("current-context: nope\ncontexts: []\n")
    with pytest.raises(kubeconfig.ConfigError, match="no context named 'nope'"):
        kubeconfig.load(path)
    with pytest.raises(kubeconfig.ConfigError, match="cannot read"):
        kubeconfig.load(tmp_path / "missing")


def test_in_cluster_needs_the_service_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(kubeconfig.ConfigError, match="--kubeconfig"):
        kubeconfig.in_cluster()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert kubeconfig.in_cluster().server == "https://[fd00::1]:443"
