"""The registry, the routes and discovery come from one resource table, and the verbs decide.

A registry built from a smaller table serves only that table's resources, and every method of
every served path answers 405 exactly when the resource's (or subresource's) verbs leave it out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette import applications

from apiserver import errors
from apiserver.endpoints import discovery, resources
from apiserver.registry import build, strategy
from apiserver.registry.fieldmanager import tracking
from apiserver.storage import sqlite
from devkit import admitting
from openapi import resources as table
from tests.unit.apiserver.endpoints.conftest import WORKER, FakeIdentity, _render, status_guards

BASE = "/apis/worker.gpustack.ai/v1"
_METHOD_VERB = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _app(registry: build.Registry,
         served: tuple[table.ResourceInfo, ...]) -> httpx.AsyncClient:
    app = applications.Starlette(
        routes=[*discovery.routes(served), *resources.routes(registry, status_guards())],
        exception_handlers={errors.StatusError: _render})
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=FakeIdentity(app)),
                             base_url="http://test")


@pytest.fixture
async def stores_only(storage: sqlite.Store) -> AsyncIterator[httpx.AsyncClient]:
    served = (table.NODE_MODEL_STORE,)
    registry = build.build(storage, served, admission=admitting.standalone())
    async with _app(registry, served) as client:
        yield client


async def test_a_smaller_table_serves_only_its_rows(stores_only: httpx.AsyncClient) -> None:
    found = (await stores_only.get(f"{BASE}/nodemodelstores")).json()
    assert found["kind"] == "NodeModelStoreList"
    missing = await stores_only.get(f"{BASE}/namespaces/a/modelartifacts")
    assert missing.status_code == 404
    listed = (await stores_only.get(BASE)).json()
    assert [r["name"] for r in listed["resources"]] == ["nodemodelstores",
                                                        "nodemodelstores/status"]


def test_every_served_kind_has_a_strategy_and_every_subresource_a_handler(
        storage: sqlite.Store) -> None:
    registry = build.build(storage, admission=admitting.standalone())
    for info in table.SERVED:
        assert registry.stores[info.plural].strategy.info is info
        for sub in info.subresources:
            assert sub.name in resources.SUBRESOURCES, f"{info.plural}/{sub.name}"
    # one strategy for every kind (recording managedFields); what a kind adds is the admission
    # chain's (issue 20)
    for rules in (registry.stores[info.plural].strategy for info in table.SERVED):
        assert type(rules) is tracking.Tracking
        assert type(rules).__mro__[1] is strategy.Strategy


def _item_path(info: table.ResourceInfo) -> str:
    if info.namespaced:
        return f"{BASE}/namespaces/a/{info.plural}/x"
    return f"{BASE}/{info.plural}/x"


@pytest.mark.parametrize("info", table.SERVED, ids=lambda info: info.plural)
@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "POST"])
async def test_item_methods_follow_the_verbs(client: httpx.AsyncClient, info: table.ResourceInfo,
                                             method: str) -> None:
    response = await client.request(method, _item_path(info), content=b"{}",
                                     headers={"Content-Type": "application/merge-patch+json"})
    allowed = _METHOD_VERB.get(method) in info.verbs
    # an allowed method reaches the store and finds nothing (or a bad body); never a 405
    assert (response.status_code == 405) is not allowed, response.text


@pytest.mark.parametrize("info", table.SERVED, ids=lambda info: info.plural)
@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "POST"])
async def test_status_methods_follow_the_subresource_verbs(
        client: httpx.AsyncClient, info: table.ResourceInfo, method: str) -> None:
    sub = info.subresource("status")
    assert sub is not None
    response = await client.request(method, _item_path(info) + "/status", content=b"{}",
                                    headers={"Content-Type": "application/merge-patch+json",
                                             "X-Test-User": WORKER})
    allowed = _METHOD_VERB.get(method) in sub.verbs
    assert (response.status_code == 405) is not allowed, response.text


@pytest.mark.parametrize("info", table.SERVED, ids=lambda info: info.plural)
async def test_create_follows_the_verbs(client: httpx.AsyncClient,
                                        info: table.ResourceInfo) -> None:
    path = f"{BASE}/namespaces/a/{info.plural}" if info.namespaced else f"{BASE}/{info.plural}"
    response = await client.post(path, json={"metadata": {"name": "x"}})
    assert (response.status_code == 405) is ("create" not in info.verbs), response.text
