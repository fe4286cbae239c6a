"""The written kubeconfig: private, complete, and written through the one atomic write."""

from __future__ import annotations

import os
import pathlib
import stat

import yaml

from apiserver.wiring import kubeconfig


def test_written_private_and_nothing_planted_is_followed(tmp_path: pathlib.Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / ".kubeconfig.tmp")  # the name the old writer reused
    path = tmp_path / "kubeconfig"
    kubeconfig.write(path, server="https://127.0.0.1:8443", ca_file=ca, token="t0k",
                     user="admin")
    assert victim.read_text() == "precious"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    document = yaml.safe_load(path.read_text())
    assert document["users"] == [{"name": "admin", "user": {"token": "t0k"}}]
    assert document["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:8443"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".kubeconfig.tmp", "ca.crt",
                                                          "kubeconfig", "victim"]
