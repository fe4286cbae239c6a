"""Accept negotiation: JSON always wins over nothing, protobuf is never chosen."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.endpoints import negotiation

View = negotiation.View


@pytest.mark.parametrize(("accept", "collection", "view", "version"), [
    (None, False, View.OBJECT, "v1"),
    ("", True, View.OBJECT, "v1"),
    ("application/json", False, View.OBJECT, "v1"),
    ("application/json;stream=watch", False, View.OBJECT, "v1"),
    ("*/*", True, View.OBJECT, "v1"),
    ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", True, View.TABLE, "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", False, View.TABLE, "v1beta1"),
    ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
     "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
     True, View.METADATA_LIST, "v1"),
    ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
     False, View.OBJECT, "v1"),
    ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", False, View.METADATA, "v1"),
    ("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io", True, View.TABLE,
     "v1"),
    ("application/json;as=Table;v=v2;g=meta.k8s.io,application/*", True, View.OBJECT, "v1"),
])
def test_choices(accept: str | None, collection: bool, view: View, version: str) -> None:
    target = negotiation.negotiate(accept, collection=collection)
    assert (target.view, target.version) == (view, version)


@pytest.mark.parametrize("accept", [
    "application/vnd.kubernetes.protobuf",
    "text/html",
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",  # on a list
    "application/json;q=0",
])
def test_not_acceptable(accept: str) -> None:
    with pytest.raises(errors.NotAcceptable):
        negotiation.negotiate(accept, collection=True)
