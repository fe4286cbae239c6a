"""The one parse of a request: verb, target and options from one object, problems carried."""

from __future__ import annotations

import pytest

from apiserver.request import info

G = "/apis/worker.gpustack.ai/v1"
ITEMS = f"{G}/namespaces/team-a/modelartifacts"


def test_list_carries_the_selector_it_authorizes() -> None:
    found = info.parse("GET", ITEMS, "fieldSelector=metadata.name%3Dqwen&limit=2")
    assert (found.verb, found.name, found.problem) == ("list", "qwen", None)
    assert found.list_options is not None and found.list_options.limit == 2
    assert found.list_options.field_selector.matches("team-a", "qwen")
    assert not found.list_options.field_selector.matches("team-a", "other")
    assert found.watch_options is None and found.write_options is None


@pytest.mark.parametrize("query", [
    "fieldSelector=metadata.name%3Dqwen&fieldSelector=",
    "fieldSelector=metadata.name%3Dqwen&fieldSelector=metadata.name%3Dother",
    "watch=false&watch=true",
    "watch=true&watch=false",
    "resourceVersion=1&resourceVersion=2",
    "labelSelector=a&labelSelector=",
])  # fmt: skip
def test_repeated_parameters_make_the_request_unservable(query: str) -> None:
    found = info.parse("GET", ITEMS, query)
    assert found.problem is not None and found.problem.code == 400
    with pytest.raises(type(found.problem)):
        found.served()


def test_watch_fallback_is_authorized_as_a_watch_and_refused() -> None:
    found = info.parse("GET", ITEMS, "watch=yes")
    assert found.verb == "watch"
    assert found.problem is not None and "not a boolean" in found.problem.message


@pytest.mark.parametrize("path", [
    f"{G}/namespaces//modelartifacts", f"{G}/namespaces/team-a/modelartifacts/./status",
    f"{G}/namespaces/team-a/modelartifacts/..", f"{G}/namespaces/../modelartifacts/x",
    f"{G}/nodemodelstores//status",
])  # fmt: skip
def test_empty_and_dot_segments_are_refused(path: str) -> None:
    found = info.parse("GET", path)
    assert found.problem is not None and found.problem.code == 400
    assert "is not allowed in a resource path" in found.problem.message


def test_options_follow_the_verb() -> None:
    created = info.parse("POST", ITEMS, "dryRun=All&fieldManager=me&watch=true&limit=x")
    assert created.verb == "create" and created.problem is None  # ignored parameters stay so
    assert created.write_options is not None and created.write_options.dry_run
    assert created.write_options.field_manager == "me"
    deleted = info.parse("DELETE", f"{ITEMS}/qwen", "propagationPolicy=Foreground")
    assert deleted.delete_query is not None
    assert deleted.delete_query.propagation_policy == "Foreground"
    got = info.parse("GET", f"{ITEMS}/qwen", "resourceVersion=5&watch=true")
    assert (got.verb, got.resource_version, got.watch_options) == ("get", "5", None)


def test_of_parses_once_per_scope() -> None:
    scope = {"type": "http", "method": "GET", "path": ITEMS, "query_string": b"limit=3"}
    first = info.of(scope)
    assert info.of(scope) is first and info.served(scope) is first
    assert first.list_options is not None and first.list_options.limit == 3


def test_of_shares_the_answer_for_a_repeated_request_line_but_never_a_problem() -> None:
    def scope(query: bytes) -> dict[str, object]:
        return {"type": "http", "method": "GET", "path": ITEMS, "query_string": query}

    assert info.of(scope(b"limit=4")) is info.of(scope(b"limit=4"))
    assert info.of(scope(b"limit=4")) is not info.of(scope(b"limit=5"))
    refused = [info.of(scope(b"limit=1&limit=2")) for _ in range(2)]
    assert all(found.problem is not None for found in refused)
    assert refused[0] is not refused[1] and refused[0].problem is not refused[1].problem


def test_of_keeps_a_bounded_number_of_request_lines() -> None:
    for n in range(info.PARSED_KEPT + 10):
        info.of({"type": "http", "method": "GET", "path": f"{ITEMS}/a-{n}", "query_string": b""})
    assert len(info._parsed) <= info.PARSED_KEPT
