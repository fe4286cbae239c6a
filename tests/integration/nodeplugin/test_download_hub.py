"""The hub downloader against the fixture hub over real loopback HTTP(S): faults, limits, tokens.

Each test runs a ``HubMaterializer`` in-process (the CSI path and the killed-process scenarios are
in ``test_download_csi.py`` and ``test_download_process.py``) and asserts at the fixture what went
over the wire: ranges requested again, open requests, Authorization headers per host.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
import pathlib
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from devkit import fixturehub
from hub import config as hub_config
from hub import huggingface, listing
from nodeplugin.cache import layout
from nodeplugin.materialize import download, interface, ranges, transfer

pytestmark = pytest.mark.integration

REPO = "org/model"
TOKEN = "hf_tok_9f8e7d6c5b4a"
MiB = 1 << 20


@pytest.fixture
def hub_server() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        yield running


Start = Callable[..., download.HubMaterializer]


@pytest.fixture
async def materializers() -> AsyncIterator[Start]:
    """``start(cache, hub, settings=None)``: a materializer over ``hub``, closed at teardown even
    when the test failed, after which no socket to the hub may be left open.

    The garbage collection at the end makes a connection that was dropped without being closed
    warn (an error under ``-W error``) in the test that leaked it, not in a later one.
    """
    started: list[tuple[download.HubMaterializer, fixturehub.Hub]] = []

    def start(
        cache: layout.Layout, hub: fixturehub.Hub, settings: download.Settings | None = None
    ) -> download.HubMaterializer:
        m = download.HubMaterializer.from_config(cache, _config(hub), settings or _settings())
        started.append((m, hub))
        return m

    yield start
    for m, _ in started:
        await m.close()
    for _, hub in started:
        assert hub.client_sockets() == []
    gc.collect()


def _files() -> dict[str, bytes | int | fixturehub.FileSpec]:
    return {
        "config.json": b'{"architectures": ["Tiny"]}\n',
        "model-00001.safetensors": 6 * MiB + 123,
        "model-00002.safetensors": 3 * MiB,
        "tokenizer.json": fixturehub.FileSpec(size=200_000, lfs=False),
        "sub/README.md": b"# tiny\n",
    }


def _settings(**overrides: object) -> download.Settings:
    base = download.Settings(
        concurrency=4,
        memory_bytes=8 * MiB,
        tuning=transfer.Tuning(part_bytes=1 * MiB, checkpoint_bytes=1 * MiB),
        policy=ranges.Policy(stall_seconds=2.0, max_failures=3, retry_base_seconds=0.05),
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


def _config(hub: fixturehub.Hub) -> hub_config.HubConfig:
    return hub_config.HubConfig(
        huggingface_endpoint=hub.endpoint,
        modelscope_endpoint=hub.modelscope_endpoint,
        ca_bundle=hub.ca_bundle,
        read_timeout=5.0,
    )


async def _digest(hub: fixturehub.Hub, token: str | None = None) -> str:
    client = hub_config.make_client(_config(hub))
    try:
        commit = hub.repo(REPO).commit
        source = huggingface.HuggingFace(client, hub.endpoint)
        return (await listing.manifest_for(source, REPO, commit, (), (), token=token))[2]
    finally:
        await client.aclose()


async def _request(hub: fixturehub.Hub, token: str | None = None) -> interface.Request:
    source = interface.Source("huggingFace", REPO, hub.repo(REPO).commit)
    return interface.Request(await _digest(hub, token), source, token)


async def _settle(
    m: download.HubMaterializer, request: interface.Request, timeout: float = 30
) -> interface.Progress:
    async with asyncio.timeout(timeout):
        while True:
            progress = await m.ensure(request)
            if progress.state != interface.State.DOWNLOADING:
                return progress
            await asyncio.sleep(0.02)


def _assert_identical(hub: fixturehub.Hub, cache: layout.Layout, digest: str) -> None:
    tree = cache.published_path(digest)
    for path in hub.repo(REPO).files:
        assert (tree / path).read_bytes() == hub.content(REPO, path).read(), path
    assert not cache.partials()


async def test_cold_download_is_verified_published_and_shared(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, materializers: Start
) -> None:
    hub_server.add_repo(REPO, _files())
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server)
    request = await _request(hub_server)
    first = await asyncio.gather(*(m.ensure(request) for _ in range(20)))
    assert all(p.state == interface.State.DOWNLOADING for p in first)
    assert (await _settle(m, request)).state == interface.State.PUBLISHED
    _assert_identical(hub_server, cache, request.digest)
    total = sum(len(hub_server.content(REPO, p).read()) for p in _files())
    assert hub_server.bytes_served(REPO) == total  # one download for twenty callers
    assert hub_server.max_open_downloads <= 4
    await m.close()


async def test_the_concurrency_limit_is_never_exceeded(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, materializers: Start
) -> None:
    hub_server.add_repo(REPO, {f"w{i}.bin": 2 * MiB for i in range(4)})
    for i in range(4):
        hub_server.faults(REPO, f"w{i}.bin").rate = 8 * MiB
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server, _settings(concurrency=3, memory_bytes=64 * MiB))
    request = await _request(hub_server)
    assert (await _settle(m, request)).state == interface.State.PUBLISHED
    # Never above the limit; and the limit is what bounds it (parallel requests did happen).
    assert 2 <= hub_server.max_open_downloads <= 3
    assert m.node.requests.peak == 3
    await m.close()


@pytest.mark.parametrize(
    "fault",
    [
        {"reset_at": 2 * MiB + 5},
        {"truncate_at": 3 * MiB + 7},
        {"stall_at": 4 * MiB + 11, "stall_seconds": None},
        {"fail_times": 2, "fail_status": 503},
        {"rate_limit_times": 2, "retry_after": 1},
    ],
    ids=["reset", "interrupted", "stalled", "5xx", "429"],
)
async def test_transient_faults_are_retried_from_the_last_byte(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, fault: dict[str, object],
    materializers: Start,
) -> None:
    hub_server.add_repo(REPO, _files())
    faults = hub_server.faults(REPO, "model-00001.safetensors")
    for name, value in fault.items():
        setattr(faults, name, value)
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server)
    request = await _request(hub_server)
    assert (await _settle(m, request)).state == interface.State.PUBLISHED
    _assert_identical(hub_server, cache, request.digest)
    served = [r for r in hub_server.ranges() if r[1] == "model-00001.safetensors"]
    at = next((v for k, v in fault.items() if k.endswith("_at")), None)
    if isinstance(at, int):
        # The retry starts where the received bytes stopped, inside the broken part. (The
        # fixture resets a connection only once the client acknowledged the bytes before the
        # offset, so a reset too stops exactly there.)
        broken = next(r for r in served if r[2] <= at < r[3])
        assert any(r[2] == at and r[3] == broken[3] for r in served), served
    total = sum(len(hub_server.content(REPO, p).read()) for p in _files())
    assert hub_server.bytes_served(REPO) <= total + 1 * MiB
    await m.close()
    # Every connection a fault broke was closed, not merely dropped from the pool.
    assert hub_server.client_sockets() == []


async def test_a_corrupted_byte_discards_the_file_and_backs_off(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, materializers: Start
) -> None:
    hub_server.add_repo(REPO, _files())
    hub_server.faults(REPO, "model-00002.safetensors").corrupt_at = 1 * MiB + 3
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server)
    request = await _request(hub_server)
    failed = await _settle(m, request)
    assert failed.state == interface.State.FAILED
    assert failed.reason == interface.Reason.INTEGRITY_MISMATCH
    assert failed.retry_time is not None
    assert not cache.is_published(request.digest)
    (partial,) = cache.partials()
    assert not (partial.path / "model-00002.safetensors").exists()
    served = hub_server.bytes_served(REPO)
    assert (await m.ensure(request)).state == interface.State.FAILED
    await asyncio.sleep(0.2)
    assert hub_server.bytes_served(REPO) == served  # backing off: nothing fetched
    await m.close()
    # The backoff survives a restart.
    again = materializers(cache, hub_server)
    assert (await again.ensure(request)).reason == interface.Reason.INTEGRITY_MISMATCH
    await again.close()


async def test_a_missing_file_fails_without_publishing(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, materializers: Start
) -> None:
    hub_server.add_repo(REPO, _files())
    faults = hub_server.faults(REPO, "tokenizer.json")
    faults.fail_times, faults.fail_status = 100, 404
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server)
    failed = await _settle(m, await _request(hub_server))
    assert failed.state == interface.State.FAILED
    assert failed.reason in (interface.Reason.SOURCE_UNAVAILABLE, interface.Reason.ACCESS_DENIED)
    assert failed.retry_time is not None
    assert not cache.published()
    await m.close()


async def test_a_listing_whose_digest_differs_fails(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, materializers: Start
) -> None:
    hub_server.add_repo(REPO, _files())
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server)
    request = dataclasses.replace(await _request(hub_server), digest="sha256:" + "1" * 64)
    failed = await _settle(m, request)
    assert failed.reason == interface.Reason.INTEGRITY_MISMATCH
    assert hub_server.bytes_served(REPO) == 0
    await m.close()


@pytest.mark.parametrize(("cdn_tls", "cdn_host"), [(False, None), (True, "localhost")],
                         ids=["https-to-http", "cross-host"])
async def test_the_token_never_leaves_the_hub_or_reaches_logs(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture, cdn_tls: bool, cdn_host: str | None,
    materializers: Start,
) -> None:
    caplog.set_level(logging.DEBUG)
    with fixturehub.run(tls=True, cdn_tls=cdn_tls, cdn_host=cdn_host) as hub:
        hub.add_repo(REPO, _files(), private_token=TOKEN)
        hub.faults(REPO, "model-00001.safetensors").reset_at = 1 * MiB
        cache = layout.Layout(tmp_path / "cache")
        m = materializers(cache, hub)
        request = await _request(hub, TOKEN)
        seen = [m.ensure(request) for _ in range(3)]
        progress = [await p for p in seen]
        progress.append(await _settle(m, request))
        assert progress[-1].state == interface.State.PUBLISHED
        wrong = dataclasses.replace(request, digest="sha256:" + "2" * 64)
        progress.append(await _settle(m, wrong))
        denied = dataclasses.replace(
            request,
            digest="sha256:" + "3" * 64,
            token=TOKEN + "x",
        )
        progress.append(await _settle(m, denied))
        assert progress[-1].reason == interface.Reason.ACCESS_DENIED
        await m.close()
        assert f"Bearer {TOKEN}" in hub.authorizations(hub.hub_netloc)
        assert set(hub.authorizations(hub.cdn_netloc)) == {None}
    for p in progress:
        assert TOKEN not in repr(p) and TOKEN not in p.message
    assert TOKEN not in caplog.text
    state = "".join(path.read_text(errors="replace") for path in cache.state.iterdir())
    assert TOKEN not in state


async def test_rate_limit_is_honoured_within_ten_percent(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, materializers: Start
) -> None:
    rate = 3 * MiB
    size = 60 * MiB  # twenty seconds at the limit
    hub_server.add_repo(REPO, {"a.bin": size // 2, "b.bin": size // 2})
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server, _settings(bytes_per_second=rate))
    request = await _request(hub_server)
    started = time.monotonic()
    assert (await _settle(m, request, timeout=60)).state == interface.State.PUBLISHED
    achieved = hub_server.bytes_served(REPO) / (time.monotonic() - started)
    assert 0.9 * rate <= achieved <= 1.1 * rate
    await m.close()


@pytest.fixture
def small_tmpfs(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mountpoint = tmp_path / "tmpfs"
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mountpoint)],
                   check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


async def test_insufficient_capacity_on_a_small_filesystem(
    hub_server: fixturehub.Hub, small_tmpfs: pathlib.Path, materializers: Start
) -> None:
    hub_server.add_repo("org/small", {"a.bin": 2 * MiB, "b.json": b"{}"})
    hub_server.add_repo(REPO, {"big.bin": 12 * MiB})
    cache = layout.Layout(small_tmpfs / "cache")
    m = materializers(cache, hub_server)
    requests = []
    async with hub_config.make_client(_config(hub_server)) as client:
        for repo in ("org/small", REPO):
            commit = hub_server.repo(repo).commit
            src = huggingface.HuggingFace(client, hub_server.endpoint)
            digest = (await listing.manifest_for(src, repo, commit, (), (), token=None))[2]
            requests.append(
                interface.Request(digest, interface.Source("huggingFace", repo, commit))
            )
    small, big = requests
    assert (await _settle(m, small)).state == interface.State.PUBLISHED
    failed = await _settle(m, big)
    assert failed.reason == interface.Reason.INSUFFICIENT_CAPACITY
    assert failed.retry_time is not None
    assert hub_server.bytes_served(REPO) == 0
    # The model already there stays available.
    assert cache.is_published(small.digest)
    assert (await m.ensure(small)).state == interface.State.PUBLISHED
    await m.close()


async def test_modelscope_sources_download_and_verify(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, materializers: Start
) -> None:
    from hub import modelscope

    hub_server.add_repo(REPO, _files())
    commit = hub_server.repo(REPO).commit
    client = hub_config.make_client(_config(hub_server))
    try:
        src = modelscope.ModelScope(client, hub_server.modelscope_endpoint)
        digest = (await listing.manifest_for(src, REPO, commit, (), (), token=None))[2]
    finally:
        await client.aclose()
    cache = layout.Layout(tmp_path / "cache")
    m = materializers(cache, hub_server)
    request = interface.Request(digest, interface.Source("modelScope", REPO, commit))
    assert (await _settle(m, request)).state == interface.State.PUBLISHED
    _assert_identical(hub_server, cache, digest)
    await m.close()
