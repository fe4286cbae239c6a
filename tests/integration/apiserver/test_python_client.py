"""The official ``kubernetes`` Python client: CRUD, pagination, watch with resume."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devkit.harness import apiserver as support
from tests.support import kubeclient
from tests.support.kubeclient import GROUP, VERSION

PLURAL = "modelartifacts"


@pytest.fixture
def api(apiserver: support.RunningServer) -> Iterator[Any]:
    objects = kubeclient.custom_objects(apiserver.kubeconfig)
    try:
        yield objects
    finally:
        objects.api_client.close()


def test_crud(api: Any) -> None:
    ns = "py-crud"
    created = api.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, kubeclient.artifact("one", ns, team="a")
    )
    assert created["metadata"]["uid"]
    assert created["metadata"]["generation"] == 1
    got = api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "one")
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    got["metadata"]["labels"]["team"] = "b"
    replaced = api.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "one", got)
    assert replaced["metadata"]["labels"] == {"team": "b"}
    assert int(replaced["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])

    with pytest.raises(client.ApiException) as stale:
        api.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "one", got)
    assert stale.value.status == 409

    patched = api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "one", {"metadata": {"labels": {"extra": "1"}}}
    )
    assert patched["metadata"]["labels"] == {"team": "b", "extra": "1"}

    api.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "one")
    with pytest.raises(client.ApiException) as missing:
        api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "one")
    assert missing.value.status == 404


def test_duplicate_create_is_409(api: Any) -> None:
    ns = "py-dup"
    api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, kubeclient.artifact("d", ns))
    with pytest.raises(client.ApiException) as exists:
        api.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, kubeclient.artifact("d", ns)
        )
    assert exists.value.status == 409


def test_list_with_pagination(api: Any) -> None:
    ns = "py-pages"
    names = [f"item-{i:02d}" for i in range(7)]
    for name in names:
        api.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, kubeclient.artifact(name, ns)
        )
    seen: list[str] = []
    pages = 0
    token = ""
    revisions = set()
    while True:
        page = api.list_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, limit=3, _continue=token
        )
        pages += 1
        assert page["kind"] == "ModelArtifactList"
        revisions.add(page["metadata"]["resourceVersion"])
        seen += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] == len(names) - len(seen)
    assert seen == names
    assert pages == 3
    assert len(revisions) == 1  # every page reads the same snapshot
    everything = api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    assert [i["metadata"]["name"] for i in everything["items"]] == names
    across = api.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector="")
    assert {i["metadata"]["name"] for i in across["items"]} >= set(names)


def test_watch_with_resume(api: Any) -> None:
    ns = "py-watch"
    listed = api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    start = listed["metadata"]["resourceVersion"]
    api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, kubeclient.artifact("w", ns))
    api.patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "w", {"metadata": {"labels": {"step": "2"}}}
    )

    first = kubeclient.events(api, ns, start, count=2)
    assert [(t, o["metadata"]["name"]) for t, o in first] == [("ADDED", "w"), ("MODIFIED", "w")]
    assert first[1][1]["metadata"]["labels"] == {"step": "2"}

    # resume from the first event: only what came after it
    resume_at = first[0][1]["metadata"]["resourceVersion"]
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "w")
    resumed = kubeclient.events(api, ns, resume_at, count=2)
    assert [t for t, _ in resumed] == ["MODIFIED", "DELETED"]
    assert resumed[0][1]["metadata"]["resourceVersion"] == first[1][1]["metadata"][
        "resourceVersion"
    ]

