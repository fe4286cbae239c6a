"""The pool layer (docs/api.md, "ModelStore"): which ModelStore wins a node, and the node's spec
with the winner's fields merged over the cluster settings.

A store matches a node when the node's labels hold every pair of its ``nodeSelector`` (``{}``
matches every node). When several match, the alphabetically first name wins the node and every
one of them overlaps (``SelectorOverlap``): a tie-break, not a policy. The winner's stated
watermarks and download limits replace the cluster's field by field; a field it leaves out keeps
the cluster setting, and an explicit ``download.bytesPerSecond: 0`` is unlimited on the pool. A
pair of watermarks that the merge would put out of order (a store stating one that does not fit
the cluster's other) keeps the cluster's pair on that node: nothing the plugin would refuse is
ever written.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controllers.runtime import client as clients
from controllers.runtime import informer
from controllers.sources import nodelabels
from openapi import nodestore, wire
from openapi.kinds import modelstore, nodemodelstore

Labels = nodelabels.Labels
HostnameOnly = nodelabels.HostnameOnly
NodeLabels = nodelabels.NodeLabels


def matches(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """Every pair of ``selector`` in ``labels`` (an unreadable selector matches nothing)."""
    if selector is None:
        return False
    return all(labels.get(key) == value for key, value in selector.items())


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """One node: the stores matching it (sorted) and the winner (``""``: none)."""

    matching: tuple[str, ...]

    @property
    def winner(self) -> str:
        return self.matching[0] if self.matching else ""


def verdict(stores: Iterable[wire.Readable], labels: Mapping[str, str]) -> Verdict:
    found = sorted(wire.key_of(store)[1] for store in stores
                   if matches(modelstore.node_selector(store), labels))
    return Verdict(tuple(found))


def overlaps(stores: Iterable[wire.Readable], nodes: Iterable[str],
             labels: Callable[[str], Mapping[str, str]]) -> tuple[dict[str, set[str]],
                                                                  dict[str, int]]:
    """Per store: the other stores sharing a node with it, and how many nodes it wins."""
    listed = list(stores)
    shared: dict[str, set[str]] = {wire.key_of(s)[1]: set() for s in listed}
    won: dict[str, int] = dict.fromkeys(shared, 0)
    for node in nodes:
        found = verdict(listed, labels(node))
        if found.winner:
            won[found.winner] += 1
        for name in found.matching:
            shared[name].update(other for other in found.matching if other != name)
    return shared, won


def merged(base: Mapping[str, Any], store: wire.Readable | None) -> dict[str, Any]:
    """``base`` (the cluster settings' part of a spec) with ``store``'s stated fields over it and
    ``store`` naming the winner; ``base`` itself when no store wins."""
    spec = copy.deepcopy(dict(base))
    if store is None:
        return spec
    for group, stated in modelstore.overrides(store).items():
        target = dict(spec.get(group) or {})
        target.update(stated)
        spec[group] = target
    high = nodemodelstore.high_percent({"spec": spec})
    low = nodemodelstore.low_percent({"spec": spec})
    if high is not None and low is not None and nodestore.watermarks_problem(high, low):
        spec["watermarks"] = copy.deepcopy(dict(nodemodelstore.watermarks({"spec": base})))
    spec["store"] = wire.key_of(store)[1]
    switches = modelstore.operations(store)
    if switches:
        spec["operations"] = copy.deepcopy(dict(switches))
    return spec


class Pools:
    """The pool layer's inputs: the ModelStores (an informer) and the nodes' labels; ``nodes``,
    the Node informer in a cluster, says when a node's labels change."""

    def __init__(self, stores: informer.Informer, labels: Labels,
                 nodes: informer.Informer | None = None) -> None:
        self.stores = stores
        self.labels = labels
        self._nodes = nodes

    def winner(self, node: str) -> wire.Obj | None:
        """The ModelStore that wins ``node``; None when none matches."""
        name = verdict(self.stores.items(), self.labels.labels(node)).winner
        return self.stores.get("", name) if name else None

    def add_handler(self, changed: Callable[[str], None]) -> None:
        """``changed(node)`` when a node's labels change, ``changed("")`` when any store does."""

        def store_changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            changed("")

        def node_changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            before = wire.mapping(old, "metadata", "labels")
            after = wire.mapping(new, "metadata", "labels")
            if old is None or new is None or before != after:
                changed(clients.key_of(new or old or {})[1])

        self.stores.add_handler(store_changed)
        if self._nodes is not None:
            self._nodes.add_handler(node_changed)

    async def synced(self) -> None:
        await self.stores.synced.wait()
        if self._nodes is not None:
            await self._nodes.synced.wait()
