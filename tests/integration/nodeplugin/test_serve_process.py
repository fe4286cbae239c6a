"""``python -m nodeplugin`` as a process with its hub flags and HTTPS port: the fixture hub over
TLS (trusted through ``--ca-bundle``), the real API server, a kubelet-like client on the real
socket, real bind mounts, and ``/metrics`` and ``/model/downloads`` scraped over HTTPS.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import ssl
import time
from collections.abc import Callable, Iterator

import grpc
import httpx
import pytest
from prometheus_client import parser

from devkit import fixturehub
from devkit.harness import apiserver as support
from hub import config as hub_config
from hub import huggingface, listing
from tests.integration.nodeplugin.csi_harness import ArtifactApi, PluginProcess, mounts_under

pytestmark = pytest.mark.integration

MiB = 1 << 20
REPO = "org/served-model"
COMMIT = "c" * 40  # what ArtifactApi.resolve writes as status.resolved.revision
TOKEN = "hf_serve_tok_9d8c7b6a"
WORKER_TOKEN = "worker-downloads-token-42"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["Tiny"]}\n',
    "model.safetensors": 8 * MiB + 3,
    "tokenizer.json": fixturehub.FileSpec(size=200_000, lfs=False),
}
P = "gpustack_model_manager_"


def _digest(hub: fixturehub.Hub) -> str:
    async def compute() -> str:
        config = hub_config.HubConfig(huggingface_endpoint=hub.endpoint, ca_bundle=hub.ca_bundle)
        client = hub_config.make_client(config)
        try:
            source = huggingface.HuggingFace(client, hub.endpoint)
            return (await listing.manifest_for(source, REPO, COMMIT, (), (), token=TOKEN))[2]
        finally:
            await client.aclose()

    return asyncio.run(compute())


@contextlib.contextmanager
def _https_client(plugin: PluginProcess, port: int) -> Iterator[httpx.Client]:
    """A client trusting the plugin's self-signed CA, once the port answers."""
    ca = plugin.root / "state" / "tls" / "ca.crt"
    _poll(ca.exists, "the self-signed CA")
    with httpx.Client(base_url=f"https://127.0.0.1:{port}",
                      verify=ssl.create_default_context(cafile=str(ca))) as client:

        def answers() -> bool:
            try:
                return client.get("/livez").status_code == 200
            except httpx.TransportError:
                return False

        _poll(answers, "the HTTPS port")
        yield client


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
    }


def _poll(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_hub_artifact_mounts_through_the_cli_plugin_with_metrics_and_downloads(
    apiserver: support.RunningServer,
    artifacts: ArtifactApi,
    start_plugin: Callable[..., PluginProcess],
    mount_guard: pathlib.Path,
) -> None:
    with fixturehub.run(tls=True) as hub:
        assert hub.ca_bundle is not None
        hub.add_repo(REPO, FILES, commit=COMMIT, private_token=TOKEN)
        # Slow enough that /model/downloads and the first mounts see the download running.
        hub.faults(REPO, "model.safetensors").rate = 4 * MiB
        digest = _digest(hub)
        token_file = mount_guard / "downloads-token"
        token_file.write_text(WORKER_TOKEN + "\n")
        port = support.free_port()
        plugin = start_plugin(apiserver, extra_args=[
            "--huggingface-endpoint", hub.endpoint, "--modelscope-endpoint", hub.endpoint,
            "--ca-bundle", hub.ca_bundle, "--https-proxy", "", "--no-proxy", "",
            "--download-concurrency", "4", "--download-bytes-per-second", "0",
            "--high-watermark", "95", "--secure-port", str(port), "--bind-address", "127.0.0.1",
            "--downloads-token-file", str(token_file),
        ])
        art = artifacts.resolve(artifacts.create("serve-a", "tiny", {"huggingFace": {
            "repository": REPO, "secretRef": {"name": "hf"}}}), digest)
        kubelet = plugin.kubelet()
        request = kubelet.publish_request(
            namespace="serve-a", pod_uid="pod-1", secrets={"token": TOKEN},
            attributes={"artifact": "tiny", "artifactUID": art["metadata"]["uid"],
                        "manifestDigest": digest})
        with _https_client(plugin, port) as client:
            _poll(lambda: client.get("/readyz").status_code == 200, "readiness")
            seen: list[tuple[grpc.StatusCode, str]] = []

            def aborted() -> bool:
                seen.append(kubelet.publish(request))
                return bool(seen[-1][0] == grpc.StatusCode.ABORTED)

            _poll(aborted, "the first Aborted")
            assert seen[-1][1].startswith(f"materializing {digest}:"), seen[-1]

            worker = {"authorization": f"Bearer {WORKER_TOKEN}"}
            assert client.get("/model/downloads").status_code == 401
            bad = client.get("/model/downloads", headers={"authorization": f"Bearer {TOKEN}"})
            assert bad.status_code == 403
            running = client.get("/model/downloads", headers=worker)
            assert running.status_code == 200, running.text
            listed = running.json()["downloads"]
            assert [d["digest"] for d in listed] == [digest]
            assert listed[0]["source"] == "Hub"

            seen += kubelet.publish_until_ok(request, timeout=30)
            assert seen[-1][0] == grpc.StatusCode.OK, seen[-1]
            target = pathlib.Path(request.target_path)
            for path in FILES:
                assert (target / path).read_bytes() == hub.content(REPO, path).read()
            assert client.get("/model/downloads", headers=worker).json() == {"downloads": []}

            total = sum(len(hub.content(REPO, p).read()) for p in FILES)

            def published_and_timed() -> bool:
                found = _samples(client.get("/metrics").text)
                # The tree is measured (once, in a worker thread) just after the attempt ends.
                return (found.get((P + "publish_duration_seconds_count", ()), 0) == 1
                        and found.get((P + "stored_bytes", ()), 0) >= total)

            _poll(published_and_timed, "the publish duration and the stored bytes")
            text = client.get("/metrics").text
            found = _samples(text)
            assert found[(P + "download_bytes_total", (("source", "hub"),))] >= total
            assert found[(P + "mounts_total", (("result", "materialized"),))] == 1
            assert found[(P + "mounts_total", (("result", "pending"),))] >= 1
            assert found[(P + "mounts_total", (("result", "denied"),))] == 0
            assert found[(P + "materializations_total", (("result", "Published"),))] == 1
            assert found[(P + "stored_bytes", ())] >= total
            assert found[(P + "capacity_bytes", ())] > 0
            assert found[(P + "gc_removed_bytes_total", ())] == 0
            for tenant in ("serve-a", "tiny", REPO, "pod-1"):
                assert tenant not in text
            kubelet.unpublish(target, request.volume_id)
        assert mounts_under(plugin.kubelet_dir) == []
        # The credential went to the hub and nowhere else.
        assert TOKEN not in text
        assert all(TOKEN not in message for _, message in seen)
        assert TOKEN.encode() not in plugin.log_file.read_bytes()
        for directory, _, names in os.walk(plugin.root):
            for name in names:
                assert TOKEN.encode() not in (pathlib.Path(directory) / name).read_bytes(), name


def test_a_bad_hub_configuration_keeps_serving_and_fails_new_digests_clearly(
    apiserver: support.RunningServer,
    artifacts: ArtifactApi,
    start_plugin: Callable[..., PluginProcess],
    mount_guard: pathlib.Path,
) -> None:
    digest = "sha256:" + "5e" * 32
    plugin = start_plugin(apiserver, extra_args=[
        "--huggingface-endpoint", "https://hub.invalid", "--ca-bundle",
        str(mount_guard / "no-such-ca.pem"), "--secure-port", "0",
    ])
    art = artifacts.resolved("serve-b", "tiny", digest)
    kubelet = plugin.kubelet()
    request = kubelet.publish_request(
        namespace="serve-b", pod_uid="pod-1",
        attributes={"artifact": "tiny", "artifactUID": art["metadata"]["uid"],
                    "manifestDigest": digest})
    outcomes: list[tuple[grpc.StatusCode, str]] = []

    def answered() -> bool:
        outcomes.append(kubelet.publish(request))
        return "InvalidRequest" in outcomes[-1][1]

    _poll(answered, "the InvalidRequest answer")
    code, message = outcomes[-1]
    assert code == grpc.StatusCode.UNAVAILABLE, message
    assert "hub configuration is unusable" in message and "no-such-ca.pem" in message
    assert "hub configuration is unusable" in plugin.log()
    assert plugin.process is not None and plugin.process.poll() is None
