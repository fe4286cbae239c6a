"""The chain: the rules in their order, run in four stages (the package docstring says which).

A rule says which writes it ``handles`` (kind, operation, subresource) and is one of four
shapes: a ``Writer`` judges who writes before the body is read (a refusal is a 403 naming the
rule), a ``Mutating`` rule changes the object, a ``Validating`` one returns field errors (one
422 for all of them), and an ``Authorizing`` one judges whether the requester may make the
change the admitted object carries (kube's ``bind``/``escalate`` checks: a 403 naming the rule),
recording what it allowed. Every validating rule sees the errors found before it, so a rule can
leave alone a field the schema already refused and each field gets one clear cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from apiserver.admission import (
    anchors,
    artifacts,
    facts,
    grants,
    pools,
    prefetches,
    rules,
    writers,
)
from apiserver.admission.attributes import WriteRequest, requester
from apiserver.auth import user as users
from apiserver.registry import strategy
from openapi import fields, resources


class Writer(Protocol):
    name: str

    def handles(self, request: WriteRequest) -> bool: ...

    async def judge(self, request: WriteRequest) -> None:
        """Raise ``errors.Forbidden`` (or 503 when it cannot tell) to refuse."""
        ...


class Mutating(Protocol):
    name: str

    def handles(self, write: strategy.Write) -> bool: ...

    def mutate(self, write: strategy.Write) -> None: ...


class Validating(Protocol):
    name: str

    def handles(self, write: strategy.Write) -> bool: ...

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        """The write's problems this rule finds; ``found``: those of the rules before it."""
        ...


class Authorizing(Protocol):
    name: str

    def handles(self, write: strategy.Write) -> bool: ...

    async def authorize(self, write: strategy.Write, user: users.UserInfo | None) -> None:
        """Raise ``errors.Forbidden`` (503 when it cannot tell) when ``user`` (None: the
        server's own write) may not make this change; may record what it allowed."""
        ...


class Chain:
    """The ordered rules; ``check`` runs the writers, ``admit`` mutates then validates,
    ``authorize`` judges the requester's change."""

    def __init__(self, cluster: facts.ClusterFacts, *, writers: Sequence[Writer],
                 mutating: Sequence[Mutating], validating: Sequence[Validating],
                 authorizing: Sequence[Authorizing] = ()) -> None:
        self.facts = cluster
        self.writers = tuple(writers)
        self.mutating = tuple(mutating)
        self.validating = tuple(validating)
        self.authorizing = tuple(authorizing)

    @property
    def names(self) -> tuple[str, ...]:
        """Every rule's name, in the order the chain runs them."""
        return (*(rule.name for rule in self.writers), *(rule.name for rule in self.mutating),
                *(rule.name for rule in self.validating),
                *(rule.name for rule in self.authorizing))

    async def check(self, info: resources.ResourceInfo, user: users.UserInfo, name: str, *,
                    subresource: str = "status") -> None:
        """The writers' stage of a write of ``info``'s ``subresource`` of object ``name``."""
        request = WriteRequest(info, subresource, name, user)
        for rule in self.writers:
            if rule.handles(request):
                await rule.judge(request)

    def admit(self, write: strategy.Write) -> list[fields.FieldError]:
        for change in self.mutating:
            if change.handles(write):
                change.mutate(write)
        found: list[fields.FieldError] = []
        for rule in self.validating:
            if rule.handles(write):
                found.extend(rule.validate(write, found))
        return found

    async def authorize(self, write: strategy.Write) -> None:
        """After ``admit`` found nothing: may the requester (``attributes.requester``) make
        this change."""
        for rule in self.authorizing:
            if rule.handles(write):
                await rule.authorize(write, requester())


def build(cluster: facts.ClusterFacts) -> Chain:
    """The chain in its order; ``cluster`` is what its rules may ask of the cluster."""
    return Chain(
        cluster,
        writers=[writers.ArtifactStatus(cluster), writers.NodeStoreStatus(cluster)],
        mutating=[prefetches.UpgradeTargets(), artifacts.NodeCounts()],
        validating=[
            rules.Schema(),
            artifacts.OneSource(),
            artifacts.ImageVolumeFloor(cluster),
            artifacts.ImmutableSpec(),
            rules.Watermarks(),
            prefetches.PrefetchSpec(),
            prefetches.PrefetchArtifact(cluster),
            prefetches.ImmutableArtifactRef(),
            grants.PrefetchGrant(cluster),
            pools.StoreSpec(),
            pools.BindingSpec(),
            pools.FrozenBinding(),
        ],
        authorizing=[anchors.AnchorGrant(cluster)],
    )
