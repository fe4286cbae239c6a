"""``python -m apiserver --standalone`` as a newcomer runs it: two lines out, clean stop."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import httpx

from devkit.harness import apiserver as support


def test_prints_two_lines_serves_and_stops_cleanly(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "local"
    port = support.free_port()
    command = [sys.executable, "-m", "apiserver", "--standalone",
               "--data-dir", str(data_dir), "--port", str(port)]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=support.REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline().decode(), process.stdout.readline().decode()]
        assert lines == [
            f"export KUBECONFIG={data_dir.resolve()}/kubeconfig\n",
            "kubectl get modelartifacts -A\n",
        ]
        kubectl = subprocess.run(
            ["kubectl", "get", "modelartifacts", "-A"],
            env=dict(os.environ, KUBECONFIG=str(data_dir / "kubeconfig")),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert kubectl.returncode == 0, kubectl.stderr
        with httpx.Client(verify=support.ssl_context(data_dir / "ca.crt")) as client:
            assert client.get(f"https://127.0.0.1:{port}/readyz").text == "ok"
        process.send_signal(signal.SIGTERM)
        rest, stderr = process.communicate(timeout=15)
        assert process.returncode == 0, stderr.decode()
        assert rest == b""  # nothing else on stdout
        tokens = (data_dir / "tokens.csv").read_text().split(",")[0]
        assert tokens not in stderr.decode()  # tokens never logged
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_help_lists_the_flags() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "apiserver", "--help"],
        cwd=support.REPO, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0
    for flag in ("--standalone", "--data-dir", "--port", "--bind", "--tls-san",
                 "--worker-user", "--node", "--token-auth-file"):  # fmt: skip
        assert flag in result.stdout
