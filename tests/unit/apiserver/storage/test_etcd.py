"""The etcd backend against a real etcd the test owns: outages, hangs, resumed watches, two
stores on one etcd, the shared compactor, leases. (The storage contract is test_contract.py.)"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator

import pytest

from apiserver.storage import interface
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd import compactor
from apiserver.storage.etcd import store as etcd_store
from devkit.harness import apiserver as support
from devkit.harness import etcd

PATIENCE = 30.0


def _store(member: etcd.Etcd, prefix: str = "/t") -> etcd_store.Store:
    config = etcd_client.Config(endpoints=(member.url,), prefix=prefix, request_timeout=1.0,
                                health_timeout=0.5)  # fmt: skip
    return etcd_store.Store(config, compaction_interval=0, start_timeout=5.0)


@pytest.fixture
async def store(etcd_server: etcd.Etcd) -> AsyncIterator[etcd_store.Store]:
    backend = _store(etcd_server)
    await backend.start()
    try:
        yield backend
    finally:
        etcd_server.resume()
        await backend.close()


async def test_keys_live_under_the_prefix(store: etcd_store.Store) -> None:
    await store.create("/modelartifacts/ns/a", b"v")
    response = await store.client.range(
        etcd_store.rpc_pb2.RangeRequest(key=b"/t/", range_end=b"/t0")
    )
    assert [kv.key for kv in response.kvs] == [b"/t/modelartifacts/ns/a"]
    with pytest.raises(ValueError, match="start with '/'"):
        await store.get("no-slash")


async def test_a_dead_etcd_fails_fast_and_recovers(
    store: etcd_store.Store, etcd_server: etcd.Etcd
) -> None:
    record = await store.create("/k", b"v")
    etcd_server.kill()
    with pytest.raises(interface.Unavailable):
        await store.get("/k")
    with pytest.raises(interface.Unavailable):
        await store.check()
    with pytest.raises((interface.Unavailable, interface.Timeout)):
        await store.create("/k2", b"v")
    etcd_server.start()
    async with asyncio.timeout(PATIENCE):  # the channel reconnects by itself
        while True:
            try:
                await store.check()
                break
            except interface.Unavailable:
                await asyncio.sleep(0.1)
    assert await store.get("/k") == record  # acknowledged before the crash: kept


async def test_a_hung_etcd_costs_a_request_its_deadline(
    store: etcd_store.Store, etcd_server: etcd.Etcd
) -> None:
    await store.create("/k", b"v")
    etcd_server.pause()
    with pytest.raises(interface.Timeout):
        await store.get("/k")
    with pytest.raises(interface.Timeout):
        await store.update("/k", b"w", expected_revision=1)
    with pytest.raises(interface.Timeout):
        await store.check()
    etcd_server.resume()
    record = await store.get("/k")
    assert record is not None and record.value == b"v"


async def test_a_watch_resumes_across_an_etcd_restart(
    store: etcd_store.Store, etcd_server: etcd.Etcd
) -> None:
    start = await store.current_revision()
    stream = store.watch("/w/", after=start)
    first = await store.create("/w/1", b"v")
    assert (await asyncio.wait_for(anext(stream), PATIENCE)).record == first
    etcd_server.kill()
    etcd_server.start()
    writer = _store(etcd_server)
    await writer.start()
    try:
        later = [await writer.create(f"/w/{i}", b"v") for i in range(2, 5)]
    finally:
        await writer.close()
    got = [(await asyncio.wait_for(anext(stream), PATIENCE)).record for _ in later]
    assert got == later  # nothing lost, nothing twice
    await stream.aclose()  # type: ignore[attr-defined]


async def test_two_stores_on_one_etcd_are_one_store(etcd_server: etcd.Etcd) -> None:
    a, b = _store(etcd_server), _store(etcd_server)
    await a.start()
    await b.start()
    try:
        start = await b.current_revision()
        stream = b.watch("/shared/", after=start)
        created = await a.create("/shared/x", b"1")
        assert (await asyncio.wait_for(anext(stream), PATIENCE)).record == created
        assert await b.get("/shared/x") == created
        results = await asyncio.gather(
            a.update("/shared/x", b"a", expected_revision=created.revision),
            b.update("/shared/x", b"b", expected_revision=created.revision),
            return_exceptions=True,
        )
        assert sum(isinstance(r, interface.Record) for r in results) == 1
        assert sum(isinstance(r, interface.RevisionConflict) for r in results) == 1
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await a.close()
        await b.close()


async def test_the_compactor_compacts_once_per_round_across_replicas(
    store: etcd_store.Store,
) -> None:
    client = store.client
    key = store.keys.compaction
    # round 1: both replicas try; one records the revision, nothing is compacted yet
    first = await compactor.step(client, key, 0, 0)
    loser = await compactor.step(client, key, 0, 0)
    assert first[0] == 1 and loser[0] == 1  # the loser learned the version
    assert await store.oldest_revision() == 0
    await store.create("/c/x", b"v")
    # round 2: the winner compacts to what it saw last round; the loser does nothing
    second = await compactor.step(client, key, first[0], first[1])
    assert await store.oldest_revision() == first[1]
    again = await compactor.step(client, key, loser[0], loser[1])
    assert again[0] == second[0]  # lost the race: learned the new version only
    assert await store.oldest_revision() == first[1]


async def test_start_gives_up_on_an_unreachable_etcd(etcd_server: etcd.Etcd) -> None:
    etcd_server.kill()
    config = etcd_client.Config(endpoints=(etcd_server.url,), request_timeout=0.5)
    backend = etcd_store.Store(config, compaction_interval=0, start_timeout=0.5)
    with pytest.raises(interface.StorageError, match="did not answer"):
        await backend.start()


async def test_tls_with_a_client_certificate(tmp_path: pathlib.Path) -> None:
    tls = etcd.Tls.make(tmp_path / "pki")
    with etcd.running(tmp_path / "etcd", tls=tls) as member:
        assert member.url.startswith("https://")
        config = etcd_client.Config(endpoints=(member.url,), ca_file=tls.ca,
                                    cert_file=tls.client_cert, key_file=tls.client_key)
        backend = etcd_store.Store(config, compaction_interval=0)
        await backend.start()
        try:
            record = await backend.create("/tls/x", b"v")
            assert await backend.get("/tls/x") == record
            assert backend.version.startswith("3.")
        finally:
            await backend.close()
        # without the client certificate etcd refuses the connection
        anonymous = etcd_store.Store(
            etcd_client.Config(endpoints=(member.url,), ca_file=tls.ca), compaction_interval=0,
            start_timeout=1.0,
        )
        with pytest.raises(interface.StorageError):
            await anonymous.start()


async def test_an_unreachable_endpoint_is_skipped(etcd_server: etcd.Etcd) -> None:
    dead = f"http://127.0.0.1:{support.free_port()}"  # nothing listens there
    config = etcd_client.Config(endpoints=(dead, etcd_server.url), request_timeout=2.0)
    backend = etcd_store.Store(config, compaction_interval=0, start_timeout=10.0)
    await backend.start()  # the status probe moved on to the live endpoint
    try:
        record = await backend.create("/f/x", b"v")
        assert await backend.get("/f/x") == record
        start = await backend.current_revision()
        stream = backend.watch("/f/", after=record.revision - 1)
        assert (await asyncio.wait_for(anext(stream), PATIENCE)).record == record
        assert start >= record.revision
        await stream.aclose()  # type: ignore[attr-defined]
    finally:
        await backend.close()
