"""Text selectors become lightkube's pairs, which encode back to the same requirements."""

from __future__ import annotations

import pytest
from lightkube.core.selector import build_selector

from kube import selectors


@pytest.mark.parametrize(("text", "encoded"), [
    ("a=b", "a=b"),
    ("a==b", "a=b"),
    ("a!=b", "a!=b"),
    ("app.kubernetes.io/name=model-manager,app.kubernetes.io/component=node-plugin",
     "app.kubernetes.io/name=model-manager,app.kubernetes.io/component=node-plugin"),
    ("env in (prod, dev),tier notin (x)", "env in (dev,prod),tier notin (x)"),
    ("gpu", "gpu"),
    ("!legacy", "!legacy"),
    (" a = b , ! c ", "a=b,!c"),
    ("a=", "a="),
])  # fmt: skip
def test_round_trip(text: str, encoded: str) -> None:
    assert build_selector(selectors.pairs(text)) == encoded


@pytest.mark.parametrize("text", ["a=(b", "a in b", "=b", "a=b=c", "a in (b", "a b"])
def test_malformed_requirements_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a selector requirement"):
        selectors.pairs(text)


def test_mappings_and_empty_pass_through() -> None:
    assert selectors.for_lightkube({"a": "b"}) == {"a": "b"}
    assert selectors.for_lightkube("") is None and selectors.for_lightkube(None) is None
