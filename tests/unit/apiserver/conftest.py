"""Fixtures shared by the apiserver unit tests: a real SQLite store and a registry on it, and a
fresh etcd member of the test's own (``etcd_server``)."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Iterator

import pytest

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.storage import sqlite
from apiserver.wiring import inprocess
from controllers.nodeview import view as views
from devkit import admitting
from devkit.harness import etcd
from timing import clock as clocks

WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"


@pytest.fixture
async def storage(tmp_path: pathlib.Path) -> AsyncIterator[sqlite.Store]:
    store = sqlite.Store(tmp_path / "store.db")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


FRESH_WAIT = 0.1
"""A read from a resourceVersion the store has not reached waits this long here, not 3 s."""


@pytest.fixture
def registry(storage: sqlite.Store) -> build.Registry:
    return build.build(storage, admission=admitting.standalone(), fresh_wait=FRESH_WAIT)


@pytest.fixture
def etcd_server(tmp_path: pathlib.Path) -> Iterator[etcd.Etcd]:
    with etcd.running(tmp_path / "etcd") as member:
        yield member


@pytest.fixture
async def progress_view(registry: build.Registry) -> AsyncIterator[views.NodeView]:
    """The progress view as the server wires it: a NodeModelStore index kept from the watch
    through the in-process client, plugged into the registry once it has listed."""
    api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER), worker_username=WORKER)
    view = views.NodeView(api, clocks.SystemClock(), None)
    view.start()
    await view.index.wait_synced()
    registry.progress_view.view = view.progress
    try:
        yield view
    finally:
        registry.progress_view.view = None
        await view.stop()
