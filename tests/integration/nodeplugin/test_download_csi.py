"""End to end through the CSI socket: a hub-backed plugin, the real API server, real bind mounts.

The plugin runs in this process (``plugin.start`` with a ``HubMaterializer`` over the fixture
hub) so the test can read its logs; kubelet's calls go over the real unix socket from threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import pathlib
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from devkit import fixturehub
from devkit.harness import apiserver as support
from hub import config as hub_config
from hub import huggingface, listing
from nodeplugin import plugin
from nodeplugin.cache import layout
from nodeplugin.materialize import download, ranges, transfer
from tests.integration.nodeplugin import csi_harness
from tests.integration.nodeplugin.csi_harness import ArtifactApi, Kubelet, mounts_under

pytestmark = pytest.mark.integration

MiB = 1 << 20
REPO = "org/e2e-model"
COMMIT = "c" * 40  # what ArtifactApi.resolve writes as status.resolved.revision
TOKEN = "hf_csi_tok_5e6f7a8b"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["Tiny"]}\n',
    "model.safetensors": 12 * MiB + 5,
    "tokenizer.json": fixturehub.FileSpec(size=300_000, lfs=False),
}


@pytest.fixture
async def running(
    apiserver: support.RunningServer, mount_guard: pathlib.Path
) -> AsyncIterator[tuple[plugin.Plugin, fixturehub.Hub]]:
    with fixturehub.run() as hub:
        hub.add_repo(REPO, FILES, commit=COMMIT, private_token=TOKEN)
        # Slow enough that the first mounts see the download in progress.
        hub.faults(REPO, "model.safetensors").rate = 8 * MiB
        base = mount_guard / "plugin"
        config = plugin.Config(
            node_name="node-1",
            endpoint=f"unix://{base / 'csi.sock'}",
            root=str(base / "cache"),
            kubelet_dir=str(base / "kubelet"),
            kubeconfig=str(apiserver.kubeconfig),
        )
        (base / "kubelet").mkdir(parents=True)
        settings = download.Settings(
            concurrency=4,
            memory_bytes=8 * MiB,
            tuning=transfer.Tuning(part_bytes=2 * MiB, checkpoint_bytes=2 * MiB),
            policy=ranges.Policy(stall_seconds=2.0, retry_base_seconds=0.05),
        )
        materializer = download.HubMaterializer.from_config(
            layout.Layout(config.root),
            hub_config.HubConfig(huggingface_endpoint=hub.endpoint),
            settings,
        )
        started = await plugin.start(config, materializer=materializer)
        try:
            yield started, hub
        finally:
            await started.stop()


async def _digest(hub: fixturehub.Hub) -> str:
    return await csi_harness.hub_digest(hub, REPO, COMMIT, TOKEN)


async def test_first_mount_aborts_with_progress_then_twenty_mounts_share_one_download(
    running: tuple[plugin.Plugin, fixturehub.Hub],
    artifacts: ArtifactApi,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    started, hub = running
    digest = await _digest(hub)
    art = artifacts.create("dl-a", "tiny", {"huggingFace": {"repository": REPO,
                                                             "secretRef": {"name": "hf"}}})
    art = artifacts.resolve(art, digest)
    attributes = {"artifact": "tiny", "artifactUID": art["metadata"]["uid"],
                  "manifestDigest": digest}
    kubelet = Kubelet(pathlib.Path(started.config.endpoint[len("unix://"):]),
                      pathlib.Path(started.config.kubelet_dir))
    try:
        requests = [
            kubelet.publish_request(namespace="dl-a", pod_uid=f"pod-{i}", attributes=attributes,
                                    secrets={"token": TOKEN})
            for i in range(20)
        ]
        # The informer may still be listing or not have seen the status write yet.
        code, message = await asyncio.to_thread(kubelet.publish_once_seen, requests[0])
        assert code == grpc.StatusCode.ABORTED, message
        assert message.startswith(f"materializing {digest}:")

        def mount(i: int) -> list[tuple[grpc.StatusCode, str]]:
            return kubelet.publish_until_ok(requests[i], timeout=30)

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            outcomes = await asyncio.gather(
                *(asyncio.wrap_future(pool.submit(mount, i)) for i in range(20))
            )
        assert all(o[-1][0] == grpc.StatusCode.OK for o in outcomes), [o[-1] for o in outcomes]
        progress = [m for o in outcomes for c, m in o if c == grpc.StatusCode.ABORTED]
        assert any(" of " in m and "received" in m for m in progress)
        for request in requests:
            target = pathlib.Path(request.target_path)
            for path in FILES:
                assert (target / path).read_bytes() == hub.content(REPO, path).read()
        total = sum(len(hub.content(REPO, p).read()) for p in FILES)
        assert hub.bytes_served(REPO) == total  # one download for twenty mounts
        assert set(hub.authorizations(hub.cdn_netloc)) == {None}
        for o in outcomes:
            assert all(TOKEN not in m for _, m in o)
        assert TOKEN not in caplog.text
        for request in requests:
            await asyncio.to_thread(kubelet.unpublish, request.target_path, request.volume_id)
        assert mounts_under(pathlib.Path(started.config.kubelet_dir)) == []
    finally:
        kubelet.close()


async def test_a_corrupted_download_is_never_mounted_and_other_models_stay_available(
    running: tuple[plugin.Plugin, fixturehub.Hub],
    artifacts: ArtifactApi,
) -> None:
    started, hub = running
    good_digest = await _digest(hub)
    hub.add_repo("org/broken", {"weights.bin": 3 * MiB, "config.json": b"{}"}, commit=COMMIT)
    hub.faults("org/broken", "weights.bin").corrupt_at = 2 * MiB + 1
    client = hub_config.make_client(hub_config.HubConfig(huggingface_endpoint=hub.endpoint))
    try:
        source = huggingface.HuggingFace(client, hub.endpoint)
        bad_digest = (await listing.manifest_for(source, "org/broken", COMMIT, (), (),
                                                 token=None))[2]
    finally:
        await client.aclose()
    good = artifacts.resolve(artifacts.create("dl-b", "good", {"huggingFace": {
        "repository": REPO, "secretRef": {"name": "hf"}}}), good_digest)
    bad = artifacts.resolve(artifacts.create("dl-b", "bad", {"huggingFace": {
        "repository": "org/broken"}}), bad_digest)
    kubelet = Kubelet(pathlib.Path(started.config.endpoint[len("unix://"):]),
                      pathlib.Path(started.config.kubelet_dir))
    try:
        bad_request = kubelet.publish_request(
            namespace="dl-b", pod_uid="pod-bad",
            attributes={"artifact": "bad", "artifactUID": bad["metadata"]["uid"],
                        "manifestDigest": bad_digest})
        good_request = kubelet.publish_request(
            namespace="dl-b", pod_uid="pod-good", secrets={"token": TOKEN},
            attributes={"artifact": "good", "artifactUID": good["metadata"]["uid"],
                        "manifestDigest": good_digest})

        def until_failed() -> tuple[grpc.StatusCode, str]:
            for _ in range(400):
                code, message = kubelet.publish(bad_request)
                if code != grpc.StatusCode.ABORTED and "IntegrityMismatch" in message:
                    return code, message
                time.sleep(0.05)
            raise AssertionError("the corrupted download never failed")

        code, message = await asyncio.to_thread(until_failed)
        assert code == grpc.StatusCode.UNAVAILABLE, message
        assert "next attempt after" in message
        bad_target = pathlib.Path(bad_request.target_path)
        assert mounts_under(bad_target.parent) == []
        assert not started.cache.is_published(bad_digest)
        # Backing off: the next mount answers at once without fetching anything.
        served = hub.bytes_served("org/broken")
        assert (await asyncio.to_thread(kubelet.publish, bad_request))[0] == \
            grpc.StatusCode.UNAVAILABLE
        assert hub.bytes_served("org/broken") == served
        # Another model is unaffected.
        outcomes = await asyncio.to_thread(kubelet.publish_until_ok, good_request, 30)
        assert outcomes[-1][0] == grpc.StatusCode.OK, outcomes[-1]
        target = pathlib.Path(good_request.target_path)
        assert (target / "config.json").read_bytes() == hub.content(REPO, "config.json").read()
        await asyncio.to_thread(kubelet.unpublish, target, good_request.volume_id)
    finally:
        kubelet.close()
