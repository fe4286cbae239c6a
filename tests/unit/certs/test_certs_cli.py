"""``python -m certs``: generate, check (exit codes), bundle, rotation on the same directory."""

from __future__ import annotations

import base64
import datetime
import pathlib
import subprocess
import sys

import pytest
import yaml

from certs import authority, cli, cluster


def _generate(tmp_path: pathlib.Path, *extra: str) -> int:
    return cli.main(["generate", "--service", "model-manager", "--namespace", "gpustack-system",
                     "--dir", str(tmp_path), *extra])  # fmt: skip


def test_generate_prints_the_ca_bundle_and_writes_manifests(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, values = tmp_path / "secret.yaml", tmp_path / "values.yaml"
    assert _generate(tmp_path, "--secret-manifest", str(manifest), "--values", str(values)) == 0
    out, err = capsys.readouterr()
    assert base64.b64decode(out.strip()) == (tmp_path / "ca.crt").read_bytes()
    assert "created a new CA" in err and "model-manager.gpustack-system.svc.cluster.local" in err
    secret = yaml.safe_load(manifest.read_text())
    assert secret["metadata"]["name"] == "model-manager-tls"
    assert secret["type"] == "kubernetes.io/tls"
    assert yaml.safe_load(values.read_text())["apiserver"]["tls"]["caBundle"] == out.strip()
    for name in ("ca.key", "tls.key", "secret.yaml"):
        assert (tmp_path / name).stat().st_mode & 0o077 == 0


def test_manifest_to_stdout_alone(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _generate(tmp_path, "--secret-manifest", "-", "--secret-name", "x") == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["kind"] == "Secret" and doc["metadata"]["name"] == "x"


def test_second_run_rotates_under_the_same_ca(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _generate(tmp_path)
    bundle_before = capsys.readouterr().out
    cert_before = (tmp_path / "tls.crt").read_bytes()
    _generate(tmp_path)
    out, err = capsys.readouterr()
    assert out == bundle_before and "reused the CA" in err
    assert (tmp_path / "tls.crt").read_bytes() != cert_before
    assert cli.main(["bundle", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == bundle_before


def test_check_passes_then_fails_near_expiry(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = cluster.Request(service="model-manager", namespace="gpustack-system", days=40)
    old = authority.utc_now() - datetime.timedelta(days=20)
    files = cluster.generate(tmp_path, request, now=old).files
    manifest = tmp_path / "s.yaml"
    manifest.write_text(cluster.secret_manifest("s", "gpustack-system", files))
    service = ["--service", "model-manager", "--namespace", "gpustack-system"]
    assert cli.main(["check", "--secret-manifest", str(manifest), *service,
                     "--within-days", "10"]) == 0  # fmt: skip
    assert "days left" in capsys.readouterr().out
    assert cli.main(["check", "--secret-manifest", str(manifest), *service]) == 1
    assert "expires within 30 days" in capsys.readouterr().err
    wrong = ["--service", "other", "--namespace", "gpustack-system", "--within-days", "1"]
    assert cli.main(["check", "--cert", str(files.cert), *wrong]) == 1
    assert "missing DNS SANs" in capsys.readouterr().err


def test_check_unreadable_input_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.pem").write_text("not a certificate")
    assert cli.main(["check", "--cert", str(tmp_path / "bad.pem")]) == 2
    assert "cannot read the certificate" in capsys.readouterr().err


def test_module_entry_point_documents_itself() -> None:
    result = subprocess.run([sys.executable, "-m", "certs", "--help"], capture_output=True,
                            text=True, check=True)  # fmt: skip
    assert "generate" in result.stdout and "Rotation" in result.stdout


def test_bad_flags_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "--service", "s", "--namespace", "n", "--dir", "x", "--days", "0"])
    assert exit_info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err
