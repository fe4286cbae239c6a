"""The informer's client over ``kube.Client``, against the fixture control plane: it lists and
watches ConfigMaps there with the same code it lists and watches ModelArtifacts with in a
cluster, so every request it makes is recorded and checked."""

from __future__ import annotations

import asyncio
import pathlib
from urllib.parse import parse_qs

import pytest
from lightkube.resources.core_v1 import ConfigMap

import kube
from devkit.controlplane import ControlPlane, Rule, UserInfo, resources
from nodeplugin import apiclient
from tests.support import slowlist

TOKEN = "plugin-secret-token"
PATH = "/api/v1/configmaps"


def _client(cp: ControlPlane, tmp_path: pathlib.Path, token: str = TOKEN
            ) -> apiclient.KubeArtifactClient:
    path = cp.write_kubeconfig(tmp_path / f"{token}.kubeconfig", token=token)
    return apiclient.KubeArtifactClient(kube.Client.from_kubeconfig(path), path=PATH,
                                        resource=ConfigMap)


def _seed(cp: ControlPlane, *names: str) -> None:
    for name in names:
        cp.seed(resources.CONFIGMAPS, {"metadata": {"name": name, "namespace": "default"},
                                       "data": {"k": name}})


@pytest.fixture
def plane(control_plane: ControlPlane) -> ControlPlane:
    control_plane.add_token(TOKEN, _user())
    control_plane.policy.grant("plugin", _read_all())
    return control_plane


def _user() -> UserInfo:
    return UserInfo("plugin", uid="plugin-uid")


def _read_all() -> Rule:
    return Rule(("get", "list", "watch"), ("",), ("configmaps",))


async def test_list_pages_carry_limit_continue_and_the_token(
    plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    _seed(plane, "a", "b", "c")
    client = _client(plane, tmp_path)
    first = await client.list_page(limit=2, continue_token="")
    assert len(first["items"]) == 2 and first["continueToken"]
    second = await client.list_page(limit=2, continue_token=first["continueToken"])
    await client.aclose()
    assert second["continueToken"] == "" and second["resourceVersion"]
    names = [i["metadata"]["name"] for i in first["items"] + second["items"]]
    assert "a" in names and "c" in names and len(names) == len(set(names))
    seen = plane.recorder.requests(PATH, "GET")
    assert [parse_qs(r.query).get("limit") for r in seen] == [["2"], ["2"]]
    assert parse_qs(seen[1].query)["continue"] == [first["continueToken"]]
    # The control plane keeps no Authorization header; the user it authenticated is the token's.
    assert all(r.user == "plugin" for r in seen)


async def test_410_and_too_large_are_gone_and_other_errors_carry_no_token(
    plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    _seed(plane, "a", "b")
    client = _client(plane, tmp_path)
    page = await client.list_page(limit=1, continue_token="")
    # kube answers 410 for a continue token whose snapshot was compacted away.
    too_old = ("The provided continue parameter is too old to display a consistent list "
               "result.")
    with plane.fail(r"^GET /api/v1/configmaps$", 410, too_old, count=1), pytest.raises(
        apiclient.Gone
    ):
        await client.list_page(limit=1, continue_token=page["continueToken"])
    # and 504 "Too large resource version" for a version its store has not reached (the
    # plugin's informer lists again on either)
    with plane.fail(r"^GET /api/v1/configmaps$", 504,
                    "Timeout: Too large resource version: 176, current: 6", count=1), \
            pytest.raises(apiclient.Gone):
        await client.list_page(limit=1, continue_token="")
    await client.aclose()
    stranger = _client(plane, tmp_path, token="not-a-known-token")
    with pytest.raises(apiclient.ApiError) as info:
        await stranger.list_page(limit=1, continue_token="")
    await stranger.aclose()
    assert "401" in str(info.value) and "not-a-known-token" not in str(info.value)
    assert TOKEN not in str(info.value)


async def test_watch_reads_events_and_bookmarks_from_a_version(
    plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    client = _client(plane, tmp_path)
    page = await client.list_page(limit=500, continue_token="")
    stream = client.watch(page["resourceVersion"])
    pending = asyncio.ensure_future(anext(stream))
    async with asyncio.timeout(30):
        while not plane.recorder.requests(PATH, "GET")[1:]:
            await asyncio.sleep(0.01)
    _seed(plane, "fresh")
    added = await asyncio.wait_for(pending, 30)
    assert added["type"] == "ADDED" and added["object"]["metadata"]["name"] == "fresh"
    plane.request_bookmark()
    bookmark = await asyncio.wait_for(anext(stream), 30)
    assert bookmark["type"] == "BOOKMARK"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(
        added["object"]["metadata"]["resourceVersion"])
    await stream.aclose()  # type: ignore[attr-defined]
    await client.aclose()
    watch = parse_qs(plane.recorder.requests(PATH, "GET")[1].query)
    assert watch["watch"] == ["true"] and watch["allowWatchBookmarks"] == ["true"]
    assert watch["resourceVersion"] == [page["resourceVersion"]]
    _seed(plane, "later")
    plane.store.compact()
    gone = _client(plane, tmp_path)
    with pytest.raises(apiclient.Gone):
        _ = [event async for event in gone.watch(page["resourceVersion"])]
    await gone.aclose()


async def test_a_slow_list_page_is_waited_for_not_given_up() -> None:
    """The client's own limit (here 0.2 s) is not a LIST page's: the page waits up to
    ``kube.LIST_TIMEOUT``, so plugins starting together do not list again from the first page
    (docs/fleet.md, the start through the aggregator)."""
    async with slowlist.serving(0.6) as url:
        client = apiclient.KubeArtifactClient(kube.Client.from_url(url, token="t", timeout=0.2),
                                              path=PATH, resource=ConfigMap)
        try:
            page = await client.list_page(limit=500, continue_token="")
        finally:
            await client.aclose()
    assert page == {"items": [], "resourceVersion": "7", "continueToken": ""}
