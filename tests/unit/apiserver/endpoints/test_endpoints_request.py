"""Body parsing: DeleteOptions merged with the query's part, unknown and duplicate fields."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.endpoints import body, request
from apiserver.request import query


async def test_delete_options_from_query_and_body() -> None:
    opts = await request.delete_options(
        query.delete_query(query.parse("propagationPolicy=Orphan&dryRun=All")), b"")
    assert opts.propagation_policy == "Orphan" and opts.dry_run
    body = (b'{"kind":"DeleteOptions","apiVersion":"v1","preconditions":'
            b'{"uid":"u","resourceVersion":"4"},"orphanDependents":false}')
    opts = await request.delete_options(query.delete_query(query.parse("")), body)
    assert (opts.uid, opts.resource_version, opts.orphan_dependents) == ("u", "4", False)
    with pytest.raises(errors.BadRequest):
        await request.delete_options(query.DeleteQuery(), b'{"apiVersion":"apps/v1"}')


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
