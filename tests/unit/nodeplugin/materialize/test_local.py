from __future__ import annotations

import asyncio
import datetime
import hashlib
import pathlib
import stat

import pytest

from nodeplugin.cache import layout
from nodeplugin.materialize import interface, local

T0 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now


FILES = {"config.json": b'{"a": 1}', "weights/model.bin": bytes(range(256)) * 4096}


def _request(digest: str) -> interface.Request:
    return interface.Request(digest, interface.Source("huggingFace", "org/m", "c" * 40))


async def _settle(importer: local.LocalImporter, digest: str) -> interface.Progress:
    async with asyncio.timeout(5):
        while True:
            progress = await importer.ensure(_request(digest))
            if progress.state is not interface.State.DOWNLOADING:
                return progress
            await asyncio.sleep(0.01)


@pytest.fixture
def cache(tmp_path: pathlib.Path) -> layout.Layout:
    c = layout.Layout(tmp_path / "cache")
    c.create()
    return c


async def test_imports_verifies_and_publishes(tmp_path: pathlib.Path, cache: layout.Layout) -> None:
    digest = local.write_import(tmp_path / "imports", FILES, gitsha1=frozenset({"config.json"}))
    importer = local.LocalImporter(cache, tmp_path / "imports")
    done: list[interface.Completion] = []
    importer.add_done_callback(done.append)
    first = await importer.ensure(_request(digest))
    assert first.state is interface.State.DOWNLOADING
    assert (await _settle(importer, digest)).state is interface.State.PUBLISHED
    tree = cache.published_path(digest)
    for path, data in FILES.items():
        assert (tree / path).read_bytes() == data
        assert stat.S_IMODE((tree / path).stat().st_mode) == 0o444
    assert (tree / layout.MANIFEST).read_bytes() == (
        tmp_path / "imports" / layout.hex_of(digest) / "manifest").read_bytes()
    async with asyncio.timeout(5):  # the attempt's task ends just after the rename
        while importer.running() or not done:
            await asyncio.sleep(0.001)
    assert cache.partials() == []
    assert [(d.digest, d.result) for d in done] == [(digest, "Published")]
    assert importer.downloaded_bytes == 0  # an import downloads nothing


async def test_concurrent_ensures_join_one_attempt(
    tmp_path: pathlib.Path, cache: layout.Layout
) -> None:
    digest = local.write_import(tmp_path / "imports", FILES)
    importer = local.LocalImporter(cache, tmp_path / "imports")
    await asyncio.gather(*(importer.ensure(_request(digest)) for _ in range(20)))
    assert len(importer.running()) == 1
    await _settle(importer, digest)


async def test_a_corrupted_file_fails_with_integrity_mismatch_and_backs_off(
    tmp_path: pathlib.Path, cache: layout.Layout, caplog: pytest.LogCaptureFixture
) -> None:
    digest = local.write_import(tmp_path / "imports", FILES)
    victim = tmp_path / "imports" / layout.hex_of(digest) / "weights" / "model.bin"
    data = bytearray(victim.read_bytes())
    data[5000] ^= 1
    victim.write_bytes(bytes(data))
    clock = Clock()
    importer = local.LocalImporter(cache, tmp_path / "imports", clock=clock)
    done: list[interface.Completion] = []
    importer.add_done_callback(done.append)
    failed = await _settle(importer, digest)
    assert failed.state is interface.State.FAILED
    assert failed.reason is interface.Reason.INTEGRITY_MISMATCH
    assert failed.retry_time == T0 + datetime.timedelta(minutes=1)
    assert [d.check for d in done] == [interface.Check.HASH]  # the metrics' reason
    # the message reaches NodeModelStore status, which names no file; the log has the detail
    assert "weights/model.bin" not in failed.message
    assert "does not match the manifest" in failed.message
    assert "weights/model.bin: sha256 differs" in caplog.text
    assert not cache.is_published(digest) and cache.partials() == []
    assert await importer.ensure(_request(digest)) == failed  # backing off: no new attempt
    # The one backoff the downloader uses: kept across restarts, doubling on the next failure.
    restarted = local.LocalImporter(cache, tmp_path / "imports", clock=clock)
    assert await restarted.ensure(_request(digest)) == failed
    clock.now = T0 + datetime.timedelta(minutes=1)
    again = await _settle(restarted, digest)
    assert again.retry_time == clock.now + datetime.timedelta(minutes=2)


async def test_a_manifest_that_does_not_hash_to_the_digest_fails(
    tmp_path: pathlib.Path, cache: layout.Layout
) -> None:
    digest = local.write_import(tmp_path / "imports", FILES)
    other = "sha256:" + hashlib.sha256(b"x").hexdigest()
    (tmp_path / "imports" / layout.hex_of(digest)).rename(
        tmp_path / "imports" / layout.hex_of(other))
    importer = local.LocalImporter(cache, tmp_path / "imports")
    failed = await _settle(importer, other)
    assert failed.reason is interface.Reason.INTEGRITY_MISMATCH


async def test_a_missing_digest_is_source_unavailable(
    tmp_path: pathlib.Path, cache: layout.Layout
) -> None:
    importer = local.LocalImporter(cache, tmp_path / "nothing")
    failed = await _settle(importer, "sha256:" + "42" * 32)
    assert failed.reason is interface.Reason.SOURCE_UNAVAILABLE


async def test_a_manifest_using_a_name_the_cache_reserves_is_refused(
    tmp_path: pathlib.Path, cache: layout.Layout, caplog: pytest.LogCaptureFixture
) -> None:
    """The downloader and the import share one check (``interface.refuse_reserved``)."""
    digest = local.write_import(tmp_path / "imports", {**FILES, layout.MARKER: b"x"})
    importer = local.LocalImporter(cache, tmp_path / "imports")
    failed = await _settle(importer, digest)
    assert failed.reason is interface.Reason.INVALID_REQUEST
    assert failed.message == "the manifest uses a file name the cache reserves"
    assert f"manifest path '{layout.MARKER}' uses a name the cache reserves" in caplog.text
    assert not cache.is_published(digest)
    with pytest.raises(local.ImportFailure) as refused:
        interface.refuse_reserved(["config.json", f"{layout.MANIFEST}/x"], local.ImportFailure)
    assert refused.value.reason is interface.Reason.INVALID_REQUEST
    interface.refuse_reserved(["config.json", f"sub/{layout.MARKER}"], local.ImportFailure)
