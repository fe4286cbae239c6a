"""Standalone delivery of a ModelPrefetch: the standalone server with embedded controllers, the
fixture hub and a real node plugin process given as ``--node node-1=URL``.

A prefetch of a private hub artifact makes the server ask node-1's plugin over its HTTPS port,
as the worker, with the artifact's token from --secrets-dir; the plugin judges the artifact with
its mount authorization and downloads, verifies and publishes the tree through its ordinary
path, with no Pod and no mount; its NodeModelStore report makes the prefetch's node Ready. The
hub serves one copy's bytes, the tree equals the hub's files, and a second prefetch of the same
artifact is Ready without another byte from the hub.
"""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from certs import authority
from devkit import fixturehub
from devkit.harness import apiserver as support
from tests.integration.nodeplugin import csi_harness
from tests.support import pools

if os.geteuid() != 0:  # the plugin's read-only view of its cache is a bind mount
    pytest.skip("the plugin process needs root (bind mounts)", allow_module_level=True)

MiB = 1 << 20
REPO = "org/warm-model"
TOKEN = "hf_prefetch_secret_7"
NAMESPACE = "team-a"
GROUP = "/apis/worker.gpustack.ai/v1"
NS = f"{GROUP}/namespaces/{NAMESPACE}"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["Warm"]}\n',
    "model.safetensors": 3 * MiB + 17,
}


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, FILES, private_token=TOKEN)
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


def _artifact(name: str, secret: str) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"source": {"huggingFace": {"repository": REPO,
                                                "secretRef": {"name": secret}}}}}


def _prefetch(name: str, artifact: str) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelPrefetch",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"artifactRef": {"name": artifact}, "bindingRef": {"name": "grant"},
                     "retention": {"pinned": True},
                     "placement": {"nodeSelector": {"matchLabels": {
                         "kubernetes.io/hostname": "node-1"}}}}}


def _ready(admin: httpx.Client, name: str) -> bool:
    found = admin.get(f"{NS}/modelprefetches/{name}").json()
    return bool((found.get("status") or {}).get("readyNodes") == 1)


def test_a_prefetch_makes_the_node_publish_the_artifact(
    hub: fixturehub.Hub, mount_guard: pathlib.Path,
) -> None:
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
            _scenario(server, hub, plugin)
            assert TOKEN not in server.log() and TOKEN not in plugin.log()
        except BaseException:
            print("--- server log\n" + server.log()[-15000:])
            print("--- plugin log\n" + plugin.log()[-15000:])
            raise
        finally:
            plugin.close()


def _scenario(server: support.RunningServer, hub: fixturehub.Hub,
              plugin: csi_harness.PluginProcess) -> None:
    with server.client() as admin:
        assert admin.post(f"{NS}/modelartifacts",
                          json=_artifact("warm", "hf-token")).status_code == 201

        def resolved() -> str:
            found = admin.get(f"{NS}/modelartifacts/warm").json()
            return str(((found.get("status") or {}).get("resolved") or {}).get(
                "manifestDigest") or "")

        digest = _wait("resolved", resolved)
        pools.setup(admin, NAMESPACE, ["node-1"])
        created = admin.post(f"{NS}/modelprefetches", json=_prefetch("warm", "warm"))
        assert created.status_code == 201, created.text

        _wait("node-1 Ready", lambda: _ready(admin, "warm"), timeout=90)
        _wait("pinned", lambda: digest in (admin.get(f"{GROUP}/nodemodelstores/node-1").json()
                                           .get("spec") or {}).get("pinned", []))
        assert f"prefetch of {digest} for {NAMESPACE}/warm" in plugin.log()  # no mount did it
        assert not list(plugin.kubelet_dir.rglob("*"))
        # the node's ordinary path: one copy from the hub, published and equal to the hub's
        size = sum(hub.content(REPO, path).size for path in FILES)
        assert hub.bytes_served(REPO) == size
        tree = plugin.root / "objects" / "sha256" / digest.removeprefix("sha256:")
        for path in FILES:
            assert (tree / path).read_bytes() == hub.content(REPO, path).read()
        assert any(m["digest"] == digest and m["state"] == "Ready" for m in (
            admin.get(f"{GROUP}/nodemodelstores/node-1").json()["status"]["models"]))
        # asked again (a resync, another prefetch), the node downloads nothing more
        assert admin.post(f"{NS}/modelprefetches",
                          json=_prefetch("again", "warm")).status_code == 201
        _wait("again Ready", lambda: _ready(admin, "again"))
        assert hub.bytes_served(REPO) == size

