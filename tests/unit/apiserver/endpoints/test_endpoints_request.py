"""Query and body parsing: booleans, list/watch/write/delete options, unknown fields."""

from __future__ import annotations

import pytest
from starlette import datastructures

from apiserver import errors
from apiserver.endpoints import body, request


def _q(text: str) -> datastructures.QueryParams:
    return datastructures.QueryParams(text)


def test_booleans_follow_go_parse_bool() -> None:
    assert request.is_watch(_q("watch=1")) and request.is_watch(_q("watch=true"))
    assert not request.is_watch(_q("watch=false")) and not request.is_watch(_q(""))
    with pytest.raises(errors.BadRequest):
        request.is_watch(_q("watch=yes"))


def test_list_and_watch_options() -> None:
    listed = request.list_options(_q("limit=5&continue=t&labelSelector=a%3Db&resourceVersion=3"))
    assert (listed.limit, listed.continue_token, listed.resource_version) == (5, "t", "3")
    assert listed.label_selector.matches({"a": "b"})
    watched = request.watch_options(_q("timeoutSeconds=7&allowWatchBookmarks=true"
                                       "&sendInitialEvents=false"))
    assert watched.timeout_seconds == 7.0 and watched.allow_bookmarks
    assert watched.send_initial_events is False
    with pytest.raises(errors.BadRequest):
        request.list_options(_q("limit=ten"))


def test_write_options() -> None:
    assert request.write_options(_q(""), "CreateOptions") == request.WriteOptions(False, "Warn")
    assert request.write_options(_q("dryRun=All&fieldValidation=Strict"), "UpdateOptions") == (
        request.WriteOptions(True, "Strict"))
    with pytest.raises(errors.Invalid, match=r'PatchOptions\.meta\.k8s\.io "" is invalid: dryRun'):
        request.write_options(_q("dryRun=Yes"), "PatchOptions")


async def test_delete_options_from_query_and_body() -> None:
    opts = await request.delete_options(_q("propagationPolicy=Orphan&dryRun=All"), b"")
    assert opts.propagation_policy == "Orphan" and opts.dry_run
    body = (b'{"kind":"DeleteOptions","apiVersion":"v1","preconditions":'
            b'{"uid":"u","resourceVersion":"4"},"orphanDependents":false}')
    opts = await request.delete_options(_q(""), body)
    assert (opts.uid, opts.resource_version, opts.orphan_dependents) == ("u", "4", False)
    with pytest.raises(errors.BadRequest):
        await request.delete_options(_q(""), b'{"apiVersion":"apps/v1"}')


async def test_decode_and_unknown_fields() -> None:
    assert (await body.decode(b"a: 1\n", "application/yaml")).document == {"a": 1}
    with pytest.raises(errors.UnsupportedMediaType):
        await body.decode(b"{}", "application/xml")
    with pytest.raises(errors.BadRequest):
        await body.decode(b"[]", "application/json")
    obj = {"kind": "ModelArtifact", "metadata": {"name": "x", "bogus": 1},
           "spec": {"source": {"huggingFace": {"repository": "a/b", "nope": 2}}}}
    warnings = request.unknown_fields("ModelArtifact", obj, "Warn")
    assert warnings == ['unknown field "metadata.bogus"',
                        'unknown field "spec.source.huggingFace.nope"']
    assert "bogus" not in obj["metadata"]


def test_duplicate_fields_warn_or_fail() -> None:
    repeated = b'{"spec":{"a":1,"a":2,"l":[{"x":1,"x":1}]},"kind":"K","kind":"K"}'
    assert body.duplicate_fields(repeated) == ["spec.a", "spec.l[0].x", "kind"]
    assert body.duplicate_fields(b"not json") == []
    obj = {"kind": "ModelArtifact", "metadata": {"name": "x"}}
    assert request.unknown_fields("ModelArtifact", obj, "Warn", ["kind"]) == [
        'duplicate field "kind"']
    with pytest.raises(errors.BadRequest, match='strict decoding error: duplicate field "kind"'):
        request.unknown_fields("ModelArtifact", obj, "Strict", ["kind"])
