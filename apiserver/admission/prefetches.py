"""The ModelPrefetch's rules beyond its schema (docs/api.md, "ModelPrefetch admission").

- ``UpgradePrefetchTargets`` (mutating, every write of the main resource): ``spec.targets``, the
  shape before the pool layer, becomes ``placement.nodeSelector`` and ``minReady``;
- ``PrefetchSpec`` (create and update): the artifact and binding names are DNS-1123 subdomains,
  the selector's keys and values are label keys and values and its operators have the values
  they need, ``placement.instanceTypes`` is refused (no InstanceType kind here), and
  ``ttlAfterLastUse`` is a duration of at least an hour on a pinned prefetch;
- ``PrefetchArtifact`` (create): an artifact that exists and is not a hub source (a claim or an
  image) is refused, naming why; one that does not exist yet is admitted and reported in status;
- ``ImmutablePrefetchArtifact`` (update): another artifact is another prefetch, and a binding,
  once set, stays (a prefetch stored before the pool layer has none and may be given one).

The grant's rules (a binding, its stores, pinning, the budget) are ``grants.py``'s. A target set
that selects no node is not refused: nodes come and go, so it is reported in status
(``Available=False/NoTargets``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.admission import attributes, facts, labels
from apiserver.registry import strategy
from openapi import fields, names, resources, sources
from openapi.kinds import modelprefetch
from timing import durations

KIND = resources.MODEL_PREFETCH.kind
MIN_TTL_SECONDS = 3600.0

_SUBDOMAIN_RULE = labels.SUBDOMAIN_RULE
_NOT_A_HUB_SOURCE = {
    sources.CLAIM: (
        "a persistentVolumeClaim source is mounted from its volume where a Pod runs, so there "
        "is nothing to download ahead of use"),
    sources.IMAGE: (
        "an image source is pulled by the container runtime of the node a Pod runs on, not by "
        "the node cache, so it cannot be prefetched here (pre-pull the image instead)"),
}


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _member(spec: dict[str, Any], name: str) -> dict[str, Any]:
    value = spec.get(name)
    return value if isinstance(value, dict) else {}


class PrefetchSpec:
    name = "PrefetchSpec"

    def handles(self, write: strategy.Write) -> bool:
        return write.info.kind == KIND and write.subresource == ""

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        return attributes.unrefused(found, spec_problems(write.obj))


def spec_problems(obj: dict[str, Any]) -> list[fields.FieldError]:
    spec = _spec(obj)
    problems: list[fields.FieldError] = []
    for ref in ("artifactRef", "bindingRef"):
        name = _member(spec, ref).get("name")
        if isinstance(name, str) and name and not names.is_dns_subdomain(name):
            problems.append(fields.invalid(f"spec.{ref}.name", name, _SUBDOMAIN_RULE))
    placement = _member(spec, "placement")
    if placement.get("instanceTypes"):
        problems.append(fields.forbidden(
            "spec.placement.instanceTypes", "this API has no InstanceType kind to name, so "
            "there is no pool of instance types to expand; select the nodes with "
            "placement.nodeSelector (a pool's labels, or kubernetes.io/hostname for nodes "
            "one by one)"))
    problems.extend(_selector_problems(_member(placement, "nodeSelector")))
    retention = _member(spec, "retention")
    ttl = retention.get("ttlAfterLastUse")
    if isinstance(ttl, str) and ttl:
        path = "spec.retention.ttlAfterLastUse"
        if retention.get("pinned") is not True:
            problems.append(fields.forbidden(
                path, "only a pinned prefetch has a pin to lift; set pinned or drop the ttl"))
        else:
            try:
                seconds = durations.parse(ttl, positive=True, bare_seconds=False)
            except ValueError:
                problems.append(fields.invalid(
                    path, ttl, "must be a duration such as 72h or 90m"))
            else:
                if seconds < MIN_TTL_SECONDS:
                    problems.append(fields.invalid(
                        path, ttl, "must be at least 1h: nodes record last use by the hour"))
    return problems


def _selector_problems(selector: dict[str, Any]) -> list[fields.FieldError]:
    path = "spec.placement.nodeSelector"
    problems = labels.selector_problems(f"{path}.matchLabels", selector.get("matchLabels"))
    expressions = selector.get("matchExpressions")
    for index, requirement in enumerate(expressions if isinstance(expressions, list) else []):
        if not isinstance(requirement, dict):
            continue
        at = f"{path}.matchExpressions[{index}]"
        key, operator = requirement.get("key"), requirement.get("operator")
        values = requirement.get("values") or []
        if isinstance(key, str):
            for problem in names.qualified_name_problems(key):
                problems.append(fields.invalid(f"{at}.key", key, f"a label key: {problem}"))
        if operator in ("In", "NotIn") and not values:
            problems.append(fields.required(f"{at}.values",
                                            f"{operator} needs at least one value"))
        if operator in ("Exists", "DoesNotExist") and values:
            problems.append(fields.forbidden(f"{at}.values", f"{operator} takes no values"))
        for position, value in enumerate(values if isinstance(values, list) else []):
            if isinstance(value, str):
                for problem in names.label_value_problems(value):
                    problems.append(fields.invalid(f"{at}.values[{position}]", value,
                                                   f"a label value {problem}"))
    return problems


class UpgradeTargets:
    """Mutating: a body in the shape before the pool layer (``spec.targets``) is converted to
    ``placement.nodeSelector`` and ``minReady`` (``modelprefetch.upgraded``), on every write of
    the main resource: an old client's create, and the server's own rewrite of a stored object
    at start (``apiserver/wiring/migrations.py``)."""

    name = "UpgradePrefetchTargets"

    def handles(self, write: strategy.Write) -> bool:
        return write.info.kind == KIND and write.subresource == ""

    def mutate(self, write: strategy.Write) -> None:
        if modelprefetch.has_targets(write.obj):
            write.obj["spec"] = modelprefetch.upgraded(write.obj)["spec"]


class PrefetchArtifact:
    """Refuse an existing artifact that is not a hub source; ``facts.artifacts`` answers (None
    there, or an artifact it does not know: admitted, and the controller reports it)."""

    name = "PrefetchArtifact"

    def __init__(self, cluster: facts.ClusterFacts) -> None:
        self.cluster = cluster

    def handles(self, write: strategy.Write) -> bool:
        return write.info.kind == KIND and write.operation == "CREATE"

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        lookup = self.cluster.artifacts
        name = _member(_spec(write.obj), "artifactRef").get("name")
        if lookup is None or not isinstance(name, str) or not name:
            return []
        namespace = str((write.obj.get("metadata") or {}).get("namespace") or "")
        kind = lookup.source_of(namespace, name)
        why = _NOT_A_HUB_SOURCE.get(kind or "")
        if why is None:
            return []
        return attributes.unrefused(found, [fields.forbidden(
            "spec.artifactRef.name",
            f"ModelArtifact {namespace}/{name} has a {kind} source: {why}; only huggingFace and "
            "modelScope artifacts can be prefetched")])


class ImmutableArtifactRef:
    name = "ImmutablePrefetchArtifact"

    def handles(self, write: strategy.Write) -> bool:
        return (write.info.kind == KIND and write.operation == "UPDATE"
                and write.subresource == "" and write.old is not None)

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        assert write.old is not None
        problems: list[fields.FieldError] = []
        before = _member(_spec(write.old), "artifactRef")
        after = _member(_spec(write.obj), "artifactRef")
        if before != after:
            problems.append(fields.forbidden(
                "spec.artifactRef", "the artifact cannot change after creation: a prefetch "
                "warms one artifact; to warm another, create a new ModelPrefetch"))
        bound = modelprefetch.binding_name(write.old)
        if bound and modelprefetch.binding_name(write.obj) != bound:
            problems.append(fields.forbidden(
                "spec.bindingRef", "the binding cannot change once set: what the prefetch "
                "holds is accounted against it; create a new ModelPrefetch under another"))
        return attributes.unrefused(found, problems)
