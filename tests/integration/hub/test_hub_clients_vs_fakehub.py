"""The ``hub`` clients against the fixture hub over real loopback HTTP(S): resolve, list, stream,
the error mapping, faults, and the token policy asserted at the fixture."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from devkit import fixturehub
from hub import config, errors, huggingface, listing, modelscope, source
from openapi import manifest

pytestmark = pytest.mark.integration

REPO = "org/model"
TOKEN = "hf_fixture_secret_token"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"a": 1}\n',
    "model.safetensors": 2 * 1024 * 1024 + 5,
    "onnx/model.onnx": 300_000,
}
BIG = "model.safetensors"


@pytest.fixture
def fixture_hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, FILES, tree_page_size=2)
        running.add_repo("org/private", FILES, private_token=TOKEN)
        yield running


@contextlib.asynccontextmanager
async def _client(
    running: fixturehub.Hub, *, read_timeout: float = 30.0
) -> AsyncIterator[httpx.AsyncClient]:
    hub_config = config.HubConfig(
        huggingface_endpoint=running.endpoint,
        modelscope_endpoint=running.modelscope_endpoint,
        ca_bundle=running.ca_bundle,
        read_timeout=read_timeout,
    )
    async with config.make_client(hub_config) as client:
        yield client


async def _read(
    client: source.Source,
    repo: str,
    commit: str,
    path: str,
    *,
    start: int = 0,
    end: int | None = None,
    token: str | None = None,
) -> bytes:
    stream = client.stream(repo, commit, path, start=start, end=end, token=token)
    async with contextlib.aclosing(stream) as chunks:
        return b"".join([chunk async for chunk in chunks])


def _expected_manifest(running: fixturehub.Hub, repo: str, *, hf: bool) -> str:
    entries = []
    for path, remote in running.repo(repo).files.items():
        if remote.lfs or not hf:
            entries.append(manifest.Entry(path, "sha256", remote.sha256, remote.content.size))
        else:
            entries.append(
                manifest.Entry(path, "gitsha1", remote.content.gitsha1, remote.content.size)
            )
    return manifest.digest(entries)


async def test_huggingface_resolve_list_and_stream(fixture_hub: fixturehub.Hub) -> None:
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        commit = await hf.resolve_revision(REPO, "main", token=None)
        assert commit == fixture_hub.repo(REPO).commit
        kept, _entries, digest = await listing.manifest_for(hf, REPO, commit, [], [], token=None)
        assert digest == _expected_manifest(fixture_hub, REPO, hf=True)
        for remote in kept:
            data = fixture_hub.content(REPO, remote.path)
            assert await _read(hf, REPO, commit, remote.path) == data.read()
        # Ranged reads, including one that resumes from the middle of a block.
        whole = fixture_hub.content(REPO, BIG)
        assert await _read(hf, REPO, commit, BIG, start=1_000_003, end=1_500_000) == whole.read(
            1_000_003, 1_500_001
        )
        assert await _read(hf, REPO, commit, BIG, start=whole.size - 7) == whole.read(
            whole.size - 7
        )


async def test_modelscope_resolve_list_stream_and_truncation(
    fixture_hub: fixturehub.Hub,
) -> None:
    # Four entries fill a page (the whole tree is five); the top level has three children.
    fixture_hub.set_modelscope_limit(4)
    async with _client(fixture_hub) as client:
        ms = modelscope.ModelScope(client, fixture_hub.modelscope_endpoint, truncation_limit=4)
        commit = await ms.resolve_revision(REPO, "master", token=None)
        kept, _entries, digest = await listing.manifest_for(ms, REPO, commit, [], [], token=None)
        assert sorted(f.path for f in kept) == sorted(FILES)
        assert digest == _expected_manifest(fixture_hub, REPO, hf=False)
        assert fixture_hub.requests(f"/api/v1/models/{REPO}/repo/files") == 3
        whole = fixture_hub.content(REPO, BIG)
        assert await _read(ms, REPO, commit, BIG, start=10, end=99) == whole.read(10, 100)
        assert await _read(ms, REPO, commit, "config.json") == FILES["config.json"]
        with pytest.raises(errors.HubError) as caught:
            await ms.resolve_revision(REPO, "no-such-branch", token=None)
        assert caught.value.reason == "RevisionNotFound"


async def test_private_repository_needs_its_token(fixture_hub: fixturehub.Hub) -> None:
    commit = fixture_hub.repo("org/private").commit
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        for token in (None, "hf_wrong"):
            with pytest.raises(errors.HubError) as caught:
                await hf.resolve_revision("org/private", "main", token=token)
            assert caught.value.reason == "AccessDenied"
            assert "does not exist or is not accessible" in caught.value.message
        assert await hf.resolve_revision("org/private", "main", token=TOKEN) == commit
        data = await _read(hf, "org/private", commit, BIG, token=TOKEN)
        assert data == fixture_hub.content("org/private", BIG).read()
    hub_seen = fixture_hub.authorizations(fixture_hub.hub_netloc)
    assert f"Bearer {TOKEN}" in hub_seen
    assert fixture_hub.authorizations(fixture_hub.cdn_netloc) == [None]


@pytest.mark.parametrize("cdn_tls", [True, False], ids=["cross-host", "https-to-http"])
async def test_token_never_reaches_the_cdn_over_tls(cdn_tls: bool) -> None:
    with fixturehub.run(tls=True, cdn_tls=cdn_tls, cdn_host="localhost") as running:
        running.add_repo("org/private", FILES, private_token=TOKEN)
        commit = running.repo("org/private").commit
        assert running.endpoint.startswith("https://")
        assert running.cdn_endpoint.startswith("https://" if cdn_tls else "http://")
        async with _client(running) as client:
            hf = huggingface.HuggingFace(client, running.endpoint)
            data = await _read(hf, "org/private", commit, BIG, token=TOKEN)
        assert data == running.content("org/private", BIG).read()
        assert running.authorizations(running.hub_netloc) == [f"Bearer {TOKEN}"]
        assert running.authorizations(running.cdn_netloc) == [None]


async def test_gated_repository_masks_digests(fixture_hub: fixturehub.Hub) -> None:
    fixture_hub.add_repo("org/gated", FILES, gated=True, private_token=TOKEN)
    commit = fixture_hub.repo("org/gated").commit
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        assert await hf.resolve_revision("org/gated", "main", token=None) == commit
        with pytest.raises(errors.HubError) as caught:
            await hf.list_files("org/gated", commit, token=None)
        assert caught.value.reason == "AccessDenied"
        with pytest.raises(errors.HubError) as caught:
            await _read(hf, "org/gated", commit, BIG)
        assert caught.value.reason == "AccessDenied"
        assert len(await hf.list_files("org/gated", commit, token=TOKEN)) == len(FILES)


async def test_revision_and_entry_not_found(fixture_hub: fixturehub.Hub) -> None:
    commit = fixture_hub.repo(REPO).commit
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        with pytest.raises(errors.HubError) as caught:
            await hf.resolve_revision(REPO, "v9", token=None)
        assert caught.value.reason == "RevisionNotFound"
        with pytest.raises(errors.HubError) as caught:
            await _read(hf, REPO, commit, "missing.bin")
        assert caught.value.reason == "EntryNotFound"


async def test_429_then_5xx_then_success(fixture_hub: fixturehub.Hub) -> None:
    faults = fixture_hub.faults(REPO)
    faults.rate_limit_times, faults.retry_after = 1, 7
    faults.fail_times = 1
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        with pytest.raises(errors.HubError) as caught:
            await hf.resolve_revision(REPO, "main", token=None)
        assert (caught.value.reason, caught.value.status) == ("SourceUnavailable", 503)
        with pytest.raises(errors.HubError) as caught:
            await hf.resolve_revision(REPO, "main", token=None)
        assert (caught.value.reason, caught.value.retry_after) == ("SourceUnavailable", 7.0)
        assert await hf.resolve_revision(REPO, "main", token=None)


@pytest.mark.parametrize("fault", ["reset_at", "truncate_at"])
async def test_broken_transfers_are_source_unavailable(
    fixture_hub: fixturehub.Hub, fault: str
) -> None:
    commit = fixture_hub.repo(REPO).commit
    setattr(fixture_hub.faults(REPO, BIG), fault, 1_000_000)
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        with pytest.raises(errors.HubError) as caught:
            await _read(hf, REPO, commit, BIG)
        assert caught.value.reason == "SourceUnavailable"
        assert fixture_hub.bytes_served(REPO, BIG) == 1_000_000
        # The fault fires once; a resume from the last byte gets the rest.
        rest = await _read(hf, REPO, commit, BIG, start=1_000_000)
        assert rest == fixture_hub.content(REPO, BIG).read(1_000_000)


async def test_a_stall_hits_the_read_timeout(fixture_hub: fixturehub.Hub) -> None:
    commit = fixture_hub.repo(REPO).commit
    fixture_hub.faults(REPO, BIG).stall_at = 500_000  # forever, until the client gives up
    async with _client(fixture_hub, read_timeout=0.5) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        with pytest.raises(errors.HubError) as caught:
            await _read(hf, REPO, commit, BIG)
    assert caught.value.reason == "SourceUnavailable"
    assert "ReadTimeout" in caught.value.message


async def test_a_corrupted_byte_is_served(fixture_hub: fixturehub.Hub) -> None:
    commit = fixture_hub.repo(REPO).commit
    fixture_hub.faults(REPO, BIG).corrupt_at = 1_234_567
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        data = await _read(hf, REPO, commit, BIG)
    good = fixture_hub.content(REPO, BIG).read()
    differing = [i for i in range(len(good)) if data[i] != good[i]]
    assert differing == [1_234_567]


async def test_open_downloads_are_counted(fixture_hub: fixturehub.Hub) -> None:
    commit = fixture_hub.repo(REPO).commit
    fixture_hub.faults(REPO, BIG).rate = 4 * 1024 * 1024  # keep the bodies open for a while
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        size = fixture_hub.content(REPO, BIG).size
        parts = [(i * size // 3, (i + 1) * size // 3 - 1) for i in range(3)]
        results = await asyncio.gather(
            *(_read(hf, REPO, commit, BIG, start=a, end=b) for a, b in parts)
        )
    assert b"".join(results) == fixture_hub.content(REPO, BIG).read()
    assert fixture_hub.max_open_downloads == 3
    assert fixture_hub.open_downloads == 0
    assert sorted((a, b) for _, _, a, b in fixture_hub.ranges()) == [(a, b + 1) for a, b in parts]


async def test_the_hubs_send_rate_is_what_its_timeline_says(fixture_hub: fixturehub.Hub) -> None:
    """``rate_after`` reads the repository's timeline: a body paced by the hub at 4 MiB/s is
    never seen faster than that past its first half (a load only slows it), and a repository
    the hub sent nothing of has no rate."""
    commit = fixture_hub.repo(REPO).commit
    paced = 4 * 1024 * 1024
    fixture_hub.faults(REPO, BIG).rate = paced
    assert fixture_hub.rate_after(REPO, 0.5) == 0.0
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        assert await _read(hf, REPO, commit, BIG) == fixture_hub.content(REPO, BIG).read()
    assert 0 < fixture_hub.rate_after(REPO, 0.5) <= 1.25 * paced  # a piece of pacing slack
    assert fixture_hub.rate_after("org/private", 0.5) == 0.0
    fixture_hub.reset_counters()
    assert fixture_hub.rate_after(REPO, 0.0) == 0.0


async def test_a_bounded_stall_then_the_rest(fixture_hub: fixturehub.Hub) -> None:
    commit = fixture_hub.repo(REPO).commit
    faults = fixture_hub.faults(REPO, BIG)
    faults.stall_at, faults.stall_seconds = 100_000, 0.2
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        assert await _read(hf, REPO, commit, BIG) == fixture_hub.content(REPO, BIG).read()
    assert faults.stall_times == 0


async def test_ratelimit_header_sets_retry_after(fixture_hub: fixturehub.Hub) -> None:
    faults = fixture_hub.faults(REPO, "config.json")
    faults.rate_limit_times, faults.ratelimit_reset = 1, 55
    commit = fixture_hub.repo(REPO).commit
    async with _client(fixture_hub) as client:
        hf = huggingface.HuggingFace(client, fixture_hub.endpoint)
        with pytest.raises(errors.HubError) as caught:
            await _read(hf, REPO, commit, "config.json")
        assert (caught.value.status, caught.value.retry_after) == (429, 56.0)
        assert await _read(hf, REPO, commit, "config.json") == FILES["config.json"]
