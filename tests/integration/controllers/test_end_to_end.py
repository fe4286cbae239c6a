"""The whole loop in one process tree: the standalone server with embedded controllers, the
fixture hub, the node plugin process and a real bind mount.

kubectl creates a private artifact; the resolver resolves it with the token from --secrets-dir;
the server keeps node-1's NodeModelStore, whose spec the plugin applies; kubelet's publish
through the CSI socket downloads it; the plugin reports the download and then the published tree
in its NodeModelStore's status (as the identity the server admits there, the worker's in this
build); the progress subresource reads the plugin's live bytes over its HTTPS port as the
worker; the mount's bytes equal the hub's. Everything is the product's own.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from certs import authority
from devkit import fixturehub
from devkit.harness import apiserver as support
from tests.integration.nodeplugin import csi_harness
from tests.support import kubectl

if os.geteuid() != 0:  # bind mounts need root; CI runs these as root
    pytest.skip("the end-to-end test needs root (bind mounts)", allow_module_level=True)

MiB = 1 << 20
REPO = "org/e2e-model"
TOKEN = "hf_e2e_secret_token_9"
NAMESPACE = "team-a"
GROUP = "/apis/worker.gpustack.ai/v1"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["E2E"]}\n',
    "tokenizer.json": b'{"version": "1.0"}\n',
    "model-00001.safetensors": 12 * MiB,
    "model-00002.safetensors": 6 * MiB + 123,
}
ARTIFACT = f"""
apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata:
  name: e2e
  namespace: {NAMESPACE}
spec:
  source:
    huggingFace:
      repository: {REPO}
      secretRef:
        name: hf-token
  allowPatterns: ["*.json", "*.safetensors"]
"""


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, FILES, private_token=TOKEN)
        # slow enough that the download is seen in progress, several times
        running.faults(REPO, "model-00001.safetensors").rate = 3 * MiB
        yield running


def _wait(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def _progress(ctl: kubectl.Kubectl) -> dict[str, Any]:
    out = ctl.run("get", "--raw",
                  f"{GROUP}/namespaces/{NAMESPACE}/modelartifacts/e2e/progress").stdout
    body: dict[str, Any] = json.loads(out)
    return body


def test_create_resolve_download_mount(hub: fixturehub.Hub, mount_guard: pathlib.Path) -> None:
    secrets_dir = mount_guard / "secrets"
    (secrets_dir / NAMESPACE / "hf-token").mkdir(parents=True)
    (secrets_dir / NAMESPACE / "hf-token" / "token").write_text(TOKEN + "\n")
    tls = authority.ensure(mount_guard / "plugin-tls")
    plugin_port = support.free_port()
    with support.running(mount_guard / "api", extra_args=[
        "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
        "--secrets-dir", str(secrets_dir),
        "--node", f"node-1=https://127.0.0.1:{plugin_port}",
        "--plugin-ca-file", str(tls.ca_cert),
    ]) as server:
        token_file = mount_guard / "worker-token"
        token_file.write_text(server.worker_token)
        server.wait_for(f"{GROUP}/nodemodelstores/node-1")
        plugin = csi_harness.PluginProcess(
            mount_guard / "plugin", server.plugin_kubeconfig, import_dir=None, extra_args=[
                "--huggingface-endpoint", hub.endpoint, "--secure-port", str(plugin_port),
                "--bind-address", "127.0.0.1", "--tls-cert-file", str(tls.cert),
                "--tls-private-key-file", str(tls.key),
                "--downloads-token-file", str(token_file),
            ])
        try:
            plugin.start()
            _loop(server, hub, plugin, mount_guard)
            assert TOKEN not in server.log() and TOKEN not in plugin.log()
        except BaseException:
            print("--- server log\n" + server.log()[-15000:])
            print("--- plugin log\n" + plugin.log())
            raise
        finally:
            plugin.close()


def _loop(server: support.RunningServer, hub: fixturehub.Hub,
          plugin: csi_harness.PluginProcess, base: pathlib.Path) -> None:
    ctl = kubectl.Kubectl(server.kubeconfig, base / "kubectl-cache")
    ctl.run("apply", "-f", "-", stdin=ARTIFACT)
    ctl.run("wait", "--for=condition=Resolved", "modelartifact/e2e", "-n", NAMESPACE,
            "--timeout=60s")
    artifact = json.loads(ctl.run("get", "mart", "e2e", "-n", NAMESPACE, "-o", "json").stdout)
    resolved = artifact["status"]["resolved"]
    commit = hub.repo(REPO).commit
    assert resolved["revision"] == commit and resolved["fileCount"] == 4
    assert resolved["sizeBytes"] == sum(hub.content(REPO, p).size for p in FILES)
    digest = resolved["manifestDigest"]
    table = ctl.run("get", "mart", "-n", NAMESPACE).stdout.splitlines()
    assert table[0].split() == ["NAME", "SOURCE", "REVISION", "SIZE", "READY", "DOWNLOADING",
                                "RESOLVED"]
    row = table[1].split()
    assert row[:4] == ["e2e", REPO, commit[:12], "18.0MiB"] and row[-1] == "True"
    assert TOKEN not in json.dumps(artifact)

    size = resolved["sizeBytes"]
    kubelet = plugin.kubelet()
    request = kubelet.publish_request(
        namespace=NAMESPACE, pod_uid="pod-e2e-1", secrets={"token": TOKEN},
        attributes={"artifact": "e2e", "artifactUID": artifact["metadata"]["uid"],
                    "manifestDigest": digest})
    code, message = kubelet.publish(request)
    assert code in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE), (code, message)

    first = _wait("live progress", lambda: (lambda p: p if p["live"] == 1 and
                                            p["downloadingBytes"] > 0 else None)(_progress(ctl)))
    assert first["downloading"] == 1 and first["manifestDigest"] == digest
    assert "node-1" not in json.dumps(first)
    later = _wait("growing live bytes", lambda: (lambda p: p if p["live"] == 1 and
                  p["downloadingBytes"] > first["downloadingBytes"] else None)(_progress(ctl)))
    assert later["downloadingBytes"] <= size

    outcomes = kubelet.publish_until_ok(request, timeout=120)
    assert outcomes[-1][0] == grpc.StatusCode.OK, outcomes[-3:]
    target = kubelet.target("pod-e2e-1")
    assert str(target.resolve()) in csi_harness.mounts_under(base)
    for path in FILES:
        assert (target / path).read_bytes() == hub.content(REPO, path).read(), path
    with pytest.raises(OSError):
        (target / "new-file").write_bytes(b"read-only")

    done = _wait("ready: 1", lambda: (lambda p: p if p["ready"] == 1 else None)(_progress(ctl)))
    assert done["downloading"] == 0 and done["live"] == 0
    _wait("READY column", lambda: ctl.run("get", "mart", "e2e", "-n", NAMESPACE, "-o",
                                          "jsonpath={.status.nodes.ready}").stdout == "1")
    row = ctl.run("get", "mart", "e2e", "-n", NAMESPACE).stdout.splitlines()[1].split()
    assert row[4:6] == ["1", "0"]  # the server's table: Ready and Downloading, counted when read
    kubelet.unpublish(target, request.volume_id)
    assert str(target.resolve()) not in csi_harness.mounts_under(base)
