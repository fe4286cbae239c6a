"""``hub.blocking``, the downloader's fast path, against the fixture hub over real loopback
HTTP(S): exact ranges through the LFS redirect, the token policy asserted at the fixture, the
hubs' error mapping, connection reuse, breaks reported at the exact byte, abort and close."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from devkit import fixturehub
from hub import blocking, config, errors, huggingface, modelscope

pytestmark = pytest.mark.integration

REPO = "org/model"
TOKEN = "hf_fixture_blocking_token"
MiB = 1 << 20
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"a": 1}\n',
    "model.safetensors": 3 * MiB + 5,
}
BIG = "model.safetensors"


@pytest.fixture
def fixture_hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, FILES)
        running.add_repo("org/private", FILES, private_token=TOKEN)
        yield running


def _config(running: fixturehub.Hub) -> config.HubConfig:
    return config.HubConfig(
        huggingface_endpoint=running.endpoint,
        modelscope_endpoint=running.modelscope_endpoint,
        ca_bundle=running.ca_bundle,
        read_timeout=5.0,
    )


def _read_all(body: blocking.RangeBody, size: int = 256 * 1024) -> bytes:
    out = bytearray()
    buffer = memoryview(bytearray(size))
    try:
        while (got := body.readinto(buffer)) > 0:
            out += buffer[:got]
    finally:
        body.close()
    return bytes(out)


def test_ranges_through_the_redirect_are_exact_and_connections_are_reused(
    fixture_hub: fixturehub.Hub,
) -> None:
    connections = blocking.Connections(_config(fixture_hub))
    hf = huggingface.HuggingFace(None, fixture_hub.endpoint,  # type: ignore[arg-type]
                                 connections=connections)
    assert hf.can_open_ranges
    commit = fixture_hub.repo(REPO).commit
    content = fixture_hub.content(REPO, BIG)
    try:
        for start, end in ((0, MiB - 1), (MiB, 3 * MiB + 4), (7, 7)):
            body = hf.open_range(REPO, commit, BIG, start=start, end=end, token=None)
            assert _read_all(body) == content.read(start, end + 1)
        small = hf.open_range(REPO, commit, "config.json", start=0, end=8, token=None)
        assert _read_all(small) == b'{"a": 1}\n'
        # Both servers' connections were kept alive and reused: one socket to each.
        assert len(fixture_hub.client_sockets()) == 2
    finally:
        connections.close()
    assert fixture_hub.client_sockets() == []


@pytest.mark.parametrize(("cdn_tls", "cdn_host"), [(False, None), (True, "localhost")],
                         ids=["https-to-http", "cross-host"])
def test_the_token_goes_to_the_hub_only(cdn_tls: bool, cdn_host: str | None) -> None:
    with fixturehub.run(tls=True, cdn_tls=cdn_tls, cdn_host=cdn_host) as running:
        running.add_repo(REPO, FILES, private_token=TOKEN)
        connections = blocking.Connections(_config(running))
        hf = huggingface.HuggingFace(None, running.endpoint,  # type: ignore[arg-type]
                                     connections=connections)
        commit = running.repo(REPO).commit
        try:
            body = hf.open_range(REPO, commit, BIG, start=10, end=MiB, token=TOKEN)
            assert _read_all(body) == running.content(REPO, BIG).read(10, MiB + 1)
            with pytest.raises(errors.HubError) as refused:
                hf.open_range(REPO, commit, BIG, start=0, end=9, token=TOKEN + "x")
        finally:
            connections.close()
        assert refused.value.reason == "AccessDenied"
        assert TOKEN not in refused.value.message
        assert f"Bearer {TOKEN}" in running.authorizations(running.hub_netloc)
        assert set(running.authorizations(running.cdn_netloc)) == {None}
        assert running.client_sockets() == []


def test_errors_are_mapped_like_the_async_path(fixture_hub: fixturehub.Hub) -> None:
    connections = blocking.Connections(_config(fixture_hub))
    hf = huggingface.HuggingFace(None, fixture_hub.endpoint,  # type: ignore[arg-type]
                                 connections=connections)
    ms = modelscope.ModelScope(None, fixture_hub.modelscope_endpoint,  # type: ignore[arg-type]
                               connections=connections)
    commit = fixture_hub.repo(REPO).commit
    try:
        with pytest.raises(errors.HubError) as missing:
            hf.open_range(REPO, commit, "nope.bin", start=0, end=1, token=None)
        assert missing.value.reason == "EntryNotFound"
        faults = fixture_hub.faults(REPO, BIG)
        faults.rate_limit_times, faults.retry_after = 1, 3
        with pytest.raises(errors.HubError) as limited:
            hf.open_range(REPO, commit, BIG, start=0, end=1, token=None)
        assert (limited.value.reason, limited.value.status) == ("SourceUnavailable", 429)
        assert limited.value.retry_after == 3
        faults.fail_times, faults.fail_status = 1, 503
        with pytest.raises(errors.HubError) as failing:
            ms.open_range(REPO, commit, BIG, start=0, end=1, token=None)
        assert (failing.value.reason, failing.value.status) == ("SourceUnavailable", 503)
        assert _read_all(ms.open_range(REPO, commit, BIG, start=0, end=99, token=None)) == (
            fixture_hub.content(REPO, BIG).read(0, 100))
    finally:
        connections.close()
    assert fixture_hub.client_sockets() == []


def test_a_reset_is_reported_after_exactly_the_bytes_before_it(
    fixture_hub: fixturehub.Hub,
) -> None:
    fixture_hub.faults(REPO, BIG).reset_at = MiB + 17
    connections = blocking.Connections(_config(fixture_hub))
    hf = huggingface.HuggingFace(None, fixture_hub.endpoint,  # type: ignore[arg-type]
                                 connections=connections)
    commit = fixture_hub.repo(REPO).commit
    body = hf.open_range(REPO, commit, BIG, start=0, end=3 * MiB + 4, token=None)
    received = 0
    buffer = memoryview(bytearray(MiB))
    try:
        with pytest.raises(errors.HubError) as broken:
            while True:
                received += body.readinto(buffer)
        assert broken.value.reason == "SourceUnavailable"
        assert received == MiB + 17
    finally:
        body.close()
        connections.close()
    assert fixture_hub.client_sockets() == []


def test_abort_unblocks_a_stalled_read_and_close_leaves_no_socket(
    fixture_hub: fixturehub.Hub,
) -> None:
    faults = fixture_hub.faults(REPO, BIG)
    faults.stall_at, faults.stall_seconds = 1000, None
    connections = blocking.Connections(_config(fixture_hub))
    hf = huggingface.HuggingFace(None, fixture_hub.endpoint,  # type: ignore[arg-type]
                                 connections=connections)
    commit = fixture_hub.repo(REPO).commit
    body = hf.open_range(REPO, commit, BIG, start=0, end=MiB, token=None, read_timeout=60)
    outcome: list[BaseException] = []
    reached = threading.Event()

    def read() -> None:
        buffer = memoryview(bytearray(MiB))
        try:
            while True:
                body.readinto(buffer)
                reached.set()
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    assert reached.wait(10)
    body.abort()
    reader.join(10)
    assert not reader.is_alive()
    assert isinstance(outcome[0], errors.HubError)
    body.close()
    connections.close()
    assert fixture_hub.client_sockets() == []


def test_a_tls_proxy_is_left_to_the_async_client() -> None:
    tls_proxy = config.HubConfig(https_proxy="https://proxy.example:3128")
    assert not blocking.Connections(tls_proxy).usable
    plain_proxy = config.HubConfig(https_proxy="http://proxy.example:3128")
    hf = huggingface.HuggingFace(None, "https://huggingface.co",  # type: ignore[arg-type]
                                 connections=blocking.Connections(plain_proxy))
    assert hf.can_open_ranges
    assert not huggingface.HuggingFace(
        None, "https://huggingface.co",  # type: ignore[arg-type]
        connections=blocking.Connections(tls_proxy),
    ).can_open_ranges


def test_later_ranges_go_straight_to_where_the_file_landed() -> None:
    with fixturehub.run(tls=True, cdn_host="localhost") as running:
        running.add_repo(REPO, FILES, private_token=TOKEN)
        connections = blocking.Connections(_config(running))
        hf = huggingface.HuggingFace(None, running.endpoint,  # type: ignore[arg-type]
                                     connections=connections)
        commit = running.repo(REPO).commit
        resolve = f"/{REPO}/resolve/{commit}/{BIG}"
        content = running.content(REPO, BIG)
        try:
            for start in (0, MiB, 2 * MiB):
                body = hf.open_range(REPO, commit, BIG, start=start, end=start + 99, token=TOKEN)
                assert _read_all(body) == content.read(start, start + 100)
            assert running.requests(resolve) == 1  # the redirect once, then the CDN directly
            # Another credential is checked by the hub again, and refused there.
            with pytest.raises(errors.HubError) as refused:
                hf.open_range(REPO, commit, BIG, start=0, end=9, token=TOKEN + "x")
            assert refused.value.reason == "AccessDenied"
            assert running.requests(resolve) == 2
            # A signed URL that stopped working (403) is forgotten: the hub is asked again.
            faults = running.faults(REPO, BIG)
            faults.fail_times, faults.fail_status = 1, 403
            body = hf.open_range(REPO, commit, BIG, start=5, end=9, token=TOKEN)
            assert _read_all(body) == content.read(5, 10)
            assert running.requests(resolve) == 3
        finally:
            connections.close()
        # The token never went to the CDN, cached or not.
        assert set(running.authorizations(running.cdn_netloc)) == {None}
        assert running.client_sockets() == []


def test_landings_are_bounded() -> None:
    landings = blocking.Landings(size=2)
    for i in range(3):
        landings.put(f"u{i}", "t", f"l{i}", False)
    assert landings.get("u0", "t") is None
    assert landings.get("u2", "t") == ("l2", False)
    assert landings.get("u2", None) is None
