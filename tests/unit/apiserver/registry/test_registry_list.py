"""ResourceStore.list: pagination, selectors and the resourceVersion rules."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.registry import build, options, selectors
from apiserver.storage import sqlite
from tests.unit.apiserver.registry.conftest import artifact


async def _seed(registry: build.Registry, count: int, namespace: str = "a") -> None:
    for index in range(count):
        labels = {"parity": "even" if index % 2 == 0 else "odd"}
        await registry.modelartifacts.create(artifact(f"m{index:02d}", labels=labels),
                                             namespace=namespace)


def _names(result: object) -> list[str]:
    return [item["metadata"]["name"] for item in result.items()]  # type: ignore[attr-defined]


async def test_pages_carry_continue_and_remaining_at_one_revision(
        registry: build.Registry) -> None:
    await _seed(registry, 5)
    first = await registry.modelartifacts.list("a", options.ListOptions(limit=2))
    assert _names(first) == ["m00", "m01"]
    assert first.remaining == 3 and first.continue_token
    await registry.modelartifacts.create(artifact("m99"), namespace="a")  # after the snapshot
    second = await registry.modelartifacts.list(
        "a", options.ListOptions(limit=2, continue_token=first.continue_token))
    third = await registry.modelartifacts.list(
        "a", options.ListOptions(limit=2, continue_token=second.continue_token))
    assert _names(second) + _names(third) == ["m02", "m03", "m04"]
    assert second.revision == first.revision == third.revision
    assert not third.continue_token and third.remaining is None


async def test_items_are_never_null_and_namespaces_are_separate(
        registry: build.Registry) -> None:
    empty = await registry.modelartifacts.list("a")
    # "0" means "any state" to clients: an empty store still answers a real revision
    assert empty.items() == [] and empty.revision == 1
    assert (await registry.modelartifacts.list("a")).revision == 1
    await _seed(registry, 2, "a")
    await _seed(registry, 1, "b")
    assert len((await registry.modelartifacts.list("a")).items()) == 2
    assert len((await registry.modelartifacts.list("")).items()) == 3


async def test_label_selector_with_limit_fills_pages(registry: build.Registry) -> None:
    await _seed(registry, 6)
    odd = selectors.parse_labels("parity=odd")
    first = await registry.modelartifacts.list("a", options.ListOptions(label_selector=odd,
                                                                        limit=2))
    assert _names(first) == ["m01", "m03"] and first.remaining is None
    rest = await registry.modelartifacts.list("a", options.ListOptions(
        label_selector=odd, limit=2, continue_token=first.continue_token))
    assert _names(rest) == ["m05"]


async def test_field_selector_on_name_and_namespace(registry: build.Registry) -> None:
    await _seed(registry, 3, "a")
    await _seed(registry, 2, "b")
    by_name = selectors.parse_fields("metadata.name=m01")
    assert _names(await registry.modelartifacts.list(
        "", options.ListOptions(field_selector=by_name))) == ["m01", "m01"]
    not_a = selectors.parse_fields("metadata.namespace!=a")
    found = await registry.modelartifacts.list("", options.ListOptions(field_selector=not_a))
    assert [item["metadata"]["namespace"] for item in found.items()] == ["b", "b"]


async def test_resource_version_rules(registry: build.Registry, storage: sqlite.Store) -> None:
    await _seed(registry, 2)
    current = await storage.current_revision()
    # A fresh store is at revision 1, so the first object is revision 2.
    exact = await registry.modelartifacts.list("a", options.ListOptions(
        resource_version="2", resource_version_match=options.EXACT))
    assert _names(exact) == ["m00"] and exact.revision == 2
    newest = await registry.modelartifacts.list("a", options.ListOptions(resource_version="0"))
    assert len(newest.items()) == 2
    with pytest.raises(errors.Timeout) as too_large:
        await registry.modelartifacts.list("a", options.ListOptions(
            resource_version=str(current + 10)))
    body = too_large.value.body()
    assert body["code"] == 504
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert body["details"]["retryAfterSeconds"] == 1  # it waited for that version first
    assert too_large.value.headers == {"Retry-After": "1"}
    with pytest.raises(errors.Timeout) as paged:
        await registry.modelartifacts.list("a", options.ListOptions(
            resource_version=str(current + 10), limit=1))
    assert "retryAfterSeconds" not in paged.value.body()["details"]  # answered at once
    with pytest.raises(errors.Timeout) as exact:
        await registry.modelartifacts.list("a", options.ListOptions(
            resource_version=str(current + 10), resource_version_match=options.EXACT))
    assert "retryAfterSeconds" not in exact.value.body()["details"]
    with pytest.raises(errors.Timeout):
        await registry.modelartifacts.get("a", "m00", resource_version=str(current + 1))
    with pytest.raises(errors.BadRequest, match="invalid resource version"):
        await registry.modelartifacts.list("a", options.ListOptions(resource_version="abc"))


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"resource_version_match": "Exact"}, "resourceVersionMatch"),
    ({"resource_version": "0", "resource_version_match": "Exact"}, "resourceVersionMatch"),
    ({"resource_version": "1", "resource_version_match": "Sometimes"}, "resourceVersionMatch"),
    ({"send_initial_events": True}, "sendInitialEvents"),
])
async def test_invalid_list_option_combinations(registry: build.Registry,
                                                kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(errors.Invalid) as refused:
        await registry.modelartifacts.list("a", options.ListOptions(**kwargs))  # type: ignore[arg-type]
    body = refused.value.body()
    assert body["message"].startswith('ListOptions.meta.k8s.io "" is invalid')
    assert body["details"]["causes"][0]["field"] == field


async def test_compacted_revisions_and_tokens_are_gone(registry: build.Registry,
                                                       storage: sqlite.Store) -> None:
    await _seed(registry, 3)
    first = await registry.modelartifacts.list("a", options.ListOptions(limit=1))
    for round_ in range(3):
        created = await registry.modelartifacts.get("a", "m00")
        created["metadata"]["labels"] = {"round": str(round_)}
        await registry.modelartifacts.update(created, namespace="a", name="m00")
    await storage.compact(await storage.current_revision() - 1)
    with pytest.raises(errors.Gone) as token_gone:
        await registry.modelartifacts.list("a", options.ListOptions(
            limit=1, continue_token=first.continue_token))
    assert "start a new list without the continue parameter" in token_gone.value.message
    with pytest.raises(errors.Gone, match=r"too old resource version: 1 \("):
        await registry.modelartifacts.list("a", options.ListOptions(
            resource_version="1", resource_version_match=options.EXACT))


async def test_malformed_continue_token_is_a_bad_request(registry: build.Registry) -> None:
    with pytest.raises(errors.BadRequest, match="continue key is not valid"):
        await registry.modelartifacts.list("a", options.ListOptions(continue_token="!!!"))
