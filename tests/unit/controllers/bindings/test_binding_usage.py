"""A binding's usage as upstream counts it: each distinct digest at its full size for every node
of the binding's stores holding it, whatever the entry's state; a digest another namespace
shares counts fully against each; absent while a referenced artifact is unresolved."""

from __future__ import annotations

from typing import Any

from controllers.bindings import usage as usages

A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64


def binding(namespace: str = "team-a", stores: tuple[str, ...] = ("large",)) -> dict[str, Any]:
    return {"metadata": {"name": "grant", "namespace": namespace},
            "spec": {"storeRefs": [{"name": s} for s in stores], "quota": {"bytes": 100}}}


def prefetch(name: str, artifact: str, namespace: str = "team-a",
             bound: str = "grant") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"artifactRef": {"name": artifact}, "bindingRef": {"name": bound}}}


ARTIFACTS = {
    ("team-a", "qwen"): {"status": {"resolved": {"manifestDigest": A, "sizeBytes": 10}}},
    ("team-a", "llama"): {"status": {"resolved": {"manifestDigest": B, "sizeBytes": 7}}},
    ("team-b", "qwen"): {"status": {"resolved": {"manifestDigest": A, "sizeBytes": 10}}},
    ("team-a", "later"): {"status": {}},
}
# node -> the store it is merged from; digest -> the nodes listing it (any state)
STORES = {"gpu-1": "large", "gpu-2": "large", "cpu-1": "small"}
HELD = {A: ["gpu-1", "gpu-2", "cpu-1"], B: ["gpu-1"]}


def count(bound: dict[str, Any], prefetches: list[dict[str, Any]]) -> usages.Usage:
    return usages.usage(bound, prefetches, lambda ns, n: ARTIFACTS.get((ns, n)),
                        lambda d: HELD.get(d, []), lambda node: STORES.get(node, ""))


def test_each_distinct_digest_at_full_size_per_node_of_the_stores() -> None:
    found = count(binding(), [prefetch("one", "qwen"), prefetch("two", "qwen"),
                              prefetch("three", "llama")])
    # A on gpu-1 and gpu-2 (cpu-1 is another store's), B on gpu-1; A counted once per node
    assert found == usages.Usage(used=2 * 10 + 7, unresolved=0, digests=2)


def test_a_shared_digest_counts_against_each_namespace() -> None:
    a = count(binding("team-a"), [prefetch("one", "qwen")])
    b = count(binding("team-b"), [prefetch("one", "qwen", "team-b")])
    assert a.used == b.used == 20


def test_only_the_binding_s_own_prefetches_count() -> None:
    found = count(binding(), [prefetch("mine", "qwen"), prefetch("other", "llama", bound="x"),
                              prefetch("theirs", "llama", namespace="team-b")])
    assert found.used == 20
    assert count(binding(), []).used == 0  # measured: nothing


def test_absent_while_a_referenced_artifact_is_unresolved() -> None:
    found = count(binding(), [prefetch("one", "qwen"), prefetch("two", "later"),
                              prefetch("three", "missing")])
    assert found.used is None and found.unresolved == 2
