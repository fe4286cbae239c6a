"""Periodic compaction of etcd's history, shared by every replica (kube-apiserver's scheme).

Each interval every replica tries one Txn on the coordination key: "if its version is still the
one I saw, write the revision I saw last time". Exactly one replica wins per interval and
compacts to the revision it recorded one interval earlier, so about one interval of history
stays readable (watch resumes, paged lists) whatever the number of replicas; the losers learn the
new version and try again next time.
"""

from __future__ import annotations

import asyncio
import logging

from apiserver.storage import interface
from apiserver.storage.etcd import client as etcd_client
from apiserver.storage.etcd.gen import rpc_pb2

_log = logging.getLogger(__name__)
_CMP = rpc_pb2.Compare


async def step(client: etcd_client.Client, key: bytes, version: int,
               revision: int) -> tuple[int, int]:
    """One attempt; returns the ``(version, revision)`` to use next time."""
    same = _CMP(result=_CMP.EQUAL, target=_CMP.VERSION, key=key, version=version)
    put = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=str(revision).encode()))
    read = rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key))
    response = await client.txn(rpc_pb2.TxnRequest(compare=[same], success=[put], failure=[read]))
    current = int(response.header.revision)
    if not response.succeeded:
        found = response.responses[0].response_range.kvs
        return (int(found[0].version) if found else 0), current
    if revision > 0:  # nothing is compacted on the very first round
        try:
            await client.compact(revision)
            _log.info("compacted etcd history up to revision %d", revision)
        except interface.Compacted:
            pass  # someone (etcd's own auto-compaction) already went further
    return version + 1, current


async def run(client: etcd_client.Client, key: bytes, interval: float) -> None:
    version, revision = 0, 0
    while True:
        await asyncio.sleep(interval)
        try:
            version, revision = await step(client, key, version, revision)
        except interface.StorageError as exc:
            _log.warning("etcd compaction skipped this round: %s", exc)
