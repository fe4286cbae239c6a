"""kube's protobuf envelope as kubectl sends a self review; malformed bodies are 400s."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.endpoints import kubeprotobuf


def _field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(kind: str, raw: bytes, api_version: str = "authorization.k8s.io/v1") -> bytes:
    meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return kubeprotobuf.MAGIC + _field(1, meta) + _field(2, raw)


def test_a_self_subject_access_review_as_kubectl_sends_it() -> None:
    # metadata (empty strings, skipped), then spec.resourceAttributes, as kubectl 1.33 wrote it
    attributes = (_field(1, b"team-a") + _field(2, b"list") + _field(3, b"worker.gpustack.ai")
                  + _field(5, b"modelartifacts") + _field(6, b"progress")
                  + bytes([8 << 3 | 2, 0]))  # an empty fieldSelector message: ignored
    raw = _field(1, _field(1, b"")) + _field(2, _field(1, attributes)) + _field(3, b"")
    found = kubeprotobuf.decode(_envelope("SelfSubjectAccessReview", raw))
    assert found == {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                     "spec": {"resourceAttributes": {
                         "namespace": "team-a", "verb": "list", "group": "worker.gpustack.ai",
                         "resource": "modelartifacts", "subresource": "progress"}}}
    rules = kubeprotobuf.decode(_envelope("SelfSubjectRulesReview",
                                          _field(2, _field(1, b"team-b"))))
    assert rules["spec"] == {"namespace": "team-b"}
    assert kubeprotobuf.decode(_envelope("SelfSubjectReview", b"", "authentication.k8s.io/v1"))[
        "kind"] == "SelfSubjectReview"


@pytest.mark.parametrize("body", [
    b"", b"k8s", b"{}", kubeprotobuf.MAGIC + b"\x0a\x7f", kubeprotobuf.MAGIC + b"\x0b",
    kubeprotobuf.MAGIC + b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    _envelope("SelfSubjectRulesReview", _field(2, _field(1, b"\xff\xfe"))),
])  # fmt: skip
def test_malformed_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(errors.BadRequest, match="protobuf body could not be decoded"):
        kubeprotobuf.decode(body)


def test_other_kinds_are_not_read_as_protobuf() -> None:
    with pytest.raises(errors.UnsupportedMediaType, match="only for the self reviews"):
        kubeprotobuf.decode(_envelope("Pod", b"", "v1"))
