"""``wiring.embedded.PodFacts.gates_usable``: the prefer webhook gates a cold opted-in Pod only in
a cluster whose kube-apiserver is 1.30 or later (scheduling gates, and narrowing a gated Pod's
node affinity, are GA there); before the version is read, on an older cluster, and standalone
(no kube-apiserver, nothing to release a gate) it is refused instead."""

from __future__ import annotations

import types
from typing import cast

from apiserver.wiring import embedded
from controllers import assembly

SET = cast(assembly.ControllerSet, types.SimpleNamespace(artifacts=None, warm=None))


def test_gates_are_usable_from_kube_1_30_in_a_cluster_only() -> None:
    def facts(version: tuple[int, int] | None) -> embedded.PodFacts:
        return embedded.PodFacts(SET, lambda: version)

    assert facts((1, 30)).gates_usable() and facts((1, 36)).gates_usable()
    assert facts((2, 0)).gates_usable()
    assert not facts((1, 29)).gates_usable()
    assert not facts(None).gates_usable()  # not read yet
    assert not embedded.PodFacts(SET).gates_usable()  # standalone
