"""Query options: booleans, list/watch/write/delete options, includeObject, each from one Query."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.request import options, query


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
    listed = options.list_options(_q("limit=5&continue=t&labelSelector=a%3Db&resourceVersion=3"))
    assert (listed.limit, listed.continue_token, listed.resource_version) == (5, "t", "3")
    assert listed.label_selector.matches({"a": "b"})
    watched = options.watch_options(_q("timeoutSeconds=7&allowWatchBookmarks=true"
                                       "&sendInitialEvents=false"))
    assert watched.timeout_seconds == 7.0 and watched.allow_bookmarks
    assert watched.send_initial_events is False
    with pytest.raises(errors.BadRequest):
        options.list_options(_q("limit=ten"))
    with pytest.raises(errors.BadRequest, match="64-bit integer"):
        options.list_options(_q("limit=" + "9" * 20))


def test_write_options() -> None:
    assert options.write_options(_q(""), "CreateOptions") == options.WriteOptions(False, "Warn")
    assert options.write_options(_q("dryRun=All&fieldValidation=Strict"), "UpdateOptions") == (
        options.WriteOptions(True, "Strict"))
    with pytest.raises(errors.Invalid, match=r'PatchOptions\.meta\.k8s\.io "" is invalid: dryRun'):
        options.write_options(_q("dryRun=Yes"), "PatchOptions")
    assert options.write_options(_q("fieldManager=kubectl"), "CreateOptions").field_manager == (
        "kubectl")
    with pytest.raises(errors.Invalid, match="fieldManager: Too long: may not be more than 128"):
        options.write_options(_q("fieldManager=" + "m" * 129), "CreateOptions")
    with pytest.raises(errors.Invalid, match="fieldValidation: Unsupported value"):
        options.write_options(_q("fieldValidation=Loud"), "UpdateOptions")


def test_delete_query_and_include_object() -> None:
    found = options.delete_query(_q("dryRun=All&dryRun=All&propagationPolicy=Orphan"))
    assert found == options.DeleteQuery(("All", "All"), "Orphan", None)
    with pytest.raises(errors.BadRequest, match="gracePeriodSeconds"):
        options.delete_query(_q("gracePeriodSeconds=soon"))
    assert options.include_object(_q("")) == "Metadata"
    assert options.include_object(_q("includeObject=Object")) == "Object"
    with pytest.raises(errors.BadRequest) as refused:
        options.include_object(_q("includeObject=" + "x" * 10_000))
    assert len(refused.value.message) < 400  # a cut of the value, never all of it
