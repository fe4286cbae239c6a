"""The ModelPrefetch's rules beyond its schema (docs/api.md, "ModelPrefetch admission").

- ``PrefetchSpec`` (create and update): the artifact and node names are DNS-1123 subdomains, the
  selector's keys and values are label keys and values, a target set is given (node names, a
  selector or both), and ``ttlAfterLastUse`` is a duration of at least an hour on a pinned
  prefetch;
- ``PrefetchArtifact`` (create): an artifact that exists and is not a hub source (a claim or an
  image) is refused, naming why; one that does not exist yet is admitted and reported in status;
- ``ImmutableArtifactRef`` (update): another artifact is another prefetch.

A target set that selects no node is not refused: nodes come and go, so it is reported in status
(``Available=False/NoTargets``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.admission import attributes, facts, labels
from apiserver.registry import strategy
from openapi import fields, names, resources, sources
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
    artifact = _member(spec, "artifactRef").get("name")
    if isinstance(artifact, str) and artifact and not names.is_dns_subdomain(artifact):
        problems.append(fields.invalid("spec.artifactRef.name", artifact, _SUBDOMAIN_RULE))
    if "targets" in spec:
        problems.extend(_target_problems(_member(spec, "targets")))
    retention = _member(spec, "retention")
    ttl = retention.get("ttlAfterLastUse")
    if isinstance(ttl, str) and ttl:
        path = "spec.retention.ttlAfterLastUse"
        if retention.get("pinned") is False:
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


def _target_problems(targets: dict[str, Any]) -> list[fields.FieldError]:
    problems: list[fields.FieldError] = []
    node_names, selector = targets.get("nodeNames"), targets.get("nodeSelector")
    if not node_names and selector is None:
        problems.append(fields.required(
            "spec.targets", "set nodeNames, nodeSelector or both ({} selects every node)"))
    for index, name in enumerate(node_names if isinstance(node_names, list) else []):
        if isinstance(name, str) and name and not names.is_dns_subdomain(name):
            problems.append(fields.invalid(f"spec.targets.nodeNames[{index}]", name,
                                           _SUBDOMAIN_RULE))
    problems.extend(labels.selector_problems("spec.targets.nodeSelector", selector))
    return problems


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
        before = _member(_spec(write.old), "artifactRef")
        after = _member(_spec(write.obj), "artifactRef")
        if before == after:
            return []
        return [fields.forbidden(
            "spec.artifactRef", "the artifact cannot change after creation: a prefetch warms "
            "one artifact; to warm another, create a new ModelPrefetch")]
