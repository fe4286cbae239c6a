"""The in-process client over the registry: the same guard as HTTP for status writes, errors
translated once, watch events and their expiry."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth import user as users
from apiserver.registry import build
from apiserver.wiring import inprocess
from controllers.runtime import client as clients
from controllers.runtime import errors, status
from tests.unit.apiserver.conftest import WORKER


def _artifact(name: str = "m") -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"source": {"huggingFace": {"repository": "org/model"}}}}


async def test_only_the_worker_writes_status(registry: build.Registry) -> None:
    await registry.modelartifacts.create(_artifact(), namespace="a")
    someone = inprocess.RegistryClient(registry, user=users.UserInfo("alice"),
                                       worker_username=WORKER)
    obj = await someone.get(clients.MODEL_ARTIFACTS, "a", "m")
    obj["status"] = {"observedGeneration": 1}
    with pytest.raises(errors.Forbidden, match="only the worker"):
        await someone.update_status(clients.MODEL_ARTIFACTS, obj)
    worker = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                      worker_username=WORKER)
    written = await worker.update_status(clients.MODEL_ARTIFACTS, obj)
    assert written["status"] == {"observedGeneration": 1}
    with pytest.raises(errors.NotFound):
        await worker.get(clients.MODEL_ARTIFACTS, "a", "nope")
    with pytest.raises(errors.NotFound):
        await worker.get(clients.SECRETS, "a", "s")  # not served here


async def test_status_writes_retry_a_conflict_and_skip_no_change(
        registry: build.Registry) -> None:
    api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                   worker_username=WORKER)
    await registry.modelartifacts.create(_artifact(), namespace="a")
    stale = await api.get(clients.MODEL_ARTIFACTS, "a", "m")
    fresh = dict(stale, status={"resolved": {"fileCount": 3}})
    await api.update_status(clients.MODEL_ARTIFACTS, fresh)  # someone else wrote meanwhile
    calls: list[dict[str, Any]] = []

    def change(current: dict[str, Any]) -> None:
        calls.append(dict(current))
        current["observedGeneration"] = 1

    written = await status.write(api, clients.MODEL_ARTIFACTS, "a", "m", change, first=stale)
    assert written is not None and len(calls) == 2  # the stale copy conflicted, then fresh
    assert written["status"] == {"resolved": {"fileCount": 3}, "observedGeneration": 1}
    assert await status.write(api, clients.MODEL_ARTIFACTS, "a", "m", change) is None
    with pytest.raises(status.Gone):
        await status.write(api, clients.MODEL_ARTIFACTS, "a", "m", change, uid="another")


async def test_watch_translates_events_and_expiry(registry: build.Registry) -> None:
    api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER),
                                   worker_username=WORKER)
    listed = await api.list(clients.MODEL_ARTIFACTS)
    await registry.modelartifacts.create(_artifact("w"), namespace="a")
    events = api.watch(clients.MODEL_ARTIFACTS, resource_version=listed.resource_version)
    event = await anext(aiter(events))
    assert event.type == "ADDED" and event.object["metadata"]["name"] == "w"
    await events.aclose()  # type: ignore[attr-defined]
    with pytest.raises(errors.ApiError):
        await anext(aiter(api.watch(clients.MODEL_ARTIFACTS, resource_version="x")))
