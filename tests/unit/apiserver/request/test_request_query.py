"""The query read once: a repeated single-valued parameter is the request's problem, lists stay
lists, unknown parameters are ignored, and the size is bounded before any work. The typed options
read from it: booleans, list/watch/write/delete options, includeObject."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.request import query


@pytest.mark.parametrize("name", sorted(query.SINGLE_VALUED))
def test_every_single_valued_parameter_given_twice_is_refused_naming_it(name: str) -> None:
    for text in (f"{name}=a&{name}=b", f"{name}=a&{name}=", f"{name}=&{name}=a",
                 f"{name}=a&{name}=a"):
        parsed = query.parse(text)
        assert parsed.problem is not None, text
        assert parsed.problem.code == 400
        assert f'query parameter "{name}" was given 2 times' in parsed.problem.message


def test_multi_valued_and_unknown_parameters() -> None:
    parsed = query.parse("dryRun=All&dryRun=All&exclude=a&exclude=b&other=1&other=2")
    assert parsed.problem is None
    assert parsed.all("dryRun") == ("All", "All") and parsed.all("exclude") == ("a", "b")
    assert parsed.get("missing", "default") == "default"
    assert not parsed.has("missing") and parsed.has("other")


def test_values_are_percent_decoded_once() -> None:
    parsed = query.parse("fieldSelector=metadata.name%3Dqwen&labelSelector=a+in+%28b%29")
    assert parsed.get("fieldSelector") == "metadata.name=qwen"
    assert parsed.get("labelSelector") == "a in (b)"


def test_too_many_parameters_is_a_problem_not_work() -> None:
    parsed = query.parse("&".join(f"p{i}=1" for i in range(query.MAX_PARAMETERS + 1)))
    assert parsed.problem is not None and parsed.problem.code == 400
    assert "more than 128 parameters" in parsed.problem.message
    assert query.parse("&".join(f"p{i}=1" for i in range(query.MAX_PARAMETERS))).problem is None


def _q(text: str) -> query.Query:
    parsed = query.parse(text)
    assert parsed.problem is None
    return parsed


def test_booleans_follow_go_parse_bool() -> None:
    assert _q("watch=1").boolean("watch") and _q("watch=true").boolean("watch")
    assert _q("watch=false").boolean("watch") is False and _q("").boolean("watch") is None
    with pytest.raises(errors.BadRequest, match='invalid value for "watch": "yes"'):
        _q("watch=yes").boolean("watch")


def test_list_and_watch_options() -> None:
    listed = query.list_options(_q("limit=5&continue=t&labelSelector=a%3Db&resourceVersion=3"))
    assert (listed.limit, listed.continue_token, listed.resource_version) == (5, "t", "3")
    assert listed.label_selector.matches({"a": "b"})
    watched = query.watch_options(_q("timeoutSeconds=7&allowWatchBookmarks=true"
                                       "&sendInitialEvents=false"))
    assert watched.timeout_seconds == 7.0 and watched.allow_bookmarks
    assert watched.send_initial_events is False
    with pytest.raises(errors.BadRequest):
        query.list_options(_q("limit=ten"))
    with pytest.raises(errors.BadRequest, match="64-bit integer"):
        query.list_options(_q("limit=" + "9" * 20))


def test_write_options() -> None:
    assert query.write_options(_q(""), "CreateOptions") == query.WriteOptions(False, "Warn")
    assert query.write_options(_q("dryRun=All&fieldValidation=Strict"), "UpdateOptions") == (
        query.WriteOptions(True, "Strict"))
    with pytest.raises(errors.Invalid, match=r'PatchOptions\.meta\.k8s\.io "" is invalid: dryRun'):
        query.write_options(_q("dryRun=Yes"), "PatchOptions")
    assert query.write_options(_q("fieldManager=kubectl"), "CreateOptions").field_manager == (
        "kubectl")
    with pytest.raises(errors.Invalid, match="fieldManager: Too long: may not be more than 128"):
        query.write_options(_q("fieldManager=" + "m" * 129), "CreateOptions")
    with pytest.raises(errors.Invalid, match="fieldValidation: Unsupported value"):
        query.write_options(_q("fieldValidation=Loud"), "UpdateOptions")


def test_delete_query_and_include_object() -> None:
    found = query.delete_query(_q("dryRun=All&dryRun=All&propagationPolicy=Orphan"))
    assert found == query.DeleteQuery(("All", "All"), "Orphan", None)
    with pytest.raises(errors.BadRequest, match="gracePeriodSeconds"):
        query.delete_query(_q("gracePeriodSeconds=soon"))
    assert query.include_object(_q("")) == "Metadata"
    assert query.include_object(_q("includeObject=Object")) == "Object"
    with pytest.raises(errors.BadRequest) as refused:
        query.include_object(_q("includeObject=" + "x" * 10_000))
    assert len(refused.value.message) < 400  # a cut of the value, never all of it
