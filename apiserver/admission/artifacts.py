"""The ModelArtifact's rules beyond its schema, with messages in our words: one source and the
grammar of each kind (``OneSource``), the image-volume floor of the cluster
(``ImageVolumeFloor``), the spec fixed at creation (``ImmutableSpec``) and ``status.nodes``
never stored (``NodeCounts``)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from apiserver.admission import attributes, facts
from apiserver.registry import strategy
from openapi import defaults, fields, grammar, names, resources, sources
from openapi.kinds import modelartifact

KIND = resources.MODEL_ARTIFACT.kind

_SUBDOMAIN_RULE = (
    "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending "
    "with a letter or digit, at most 253 characters"
)
_LABEL_RULE = (
    "must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a "
    "letter or digit, at most 63 characters"
)
_TAG_REFUSAL = (
    "must be pinned by digest, as name@sha256:<64 hex digits>: a tag is mutable, so one artifact "
    "could deliver different weights on different pulls; pin the digest the tag points to now"
)


def _creates_artifact(write: strategy.Write) -> bool:
    return write.info.kind == KIND and write.operation == "CREATE"


def _source(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    source = spec.get("source")
    return (spec, source) if isinstance(source, dict) else None


def _chosen(source: dict[str, Any]) -> list[str]:
    return [name for name in sources.KINDS if source.get(name) is not None]


class OneSource:
    """Exactly one source; its repository, revision, Secret, claim, path or image reference by
    ``openapi.grammar``/``names``; patterns and ``expectedDigest`` only where they mean
    something. Skips a field the schema refused already, so each field gets one clear cause."""

    name = "ArtifactSource"

    def handles(self, write: strategy.Write) -> bool:
        return _creates_artifact(write)

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        return attributes.unrefused(found, _spec_rules(write.obj))


class ImageVolumeFloor:
    """An image source needs a cluster at ``facts.IMAGE_VOLUME_FLOOR`` or later; refused too when
    the version cannot be read (asked at every create, from the facts)."""

    name = "ImageVolumeFloor"

    def __init__(self, cluster: facts.ClusterFacts) -> None:
        self.cluster = cluster

    def handles(self, write: strategy.Write) -> bool:
        return _creates_artifact(write)

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        parts = _source(write.obj)
        if parts is None:
            return []
        chosen = _chosen(parts[1])
        if not chosen or chosen[0] != sources.IMAGE or not isinstance(parts[1][sources.IMAGE],
                                                                      dict):
            return []
        version = self.cluster.kubernetes_version()
        if version is not None and version >= facts.IMAGE_VOLUME_FLOOR:
            return []
        seen = "could not be read" if version is None else f"is {version[0]}.{version[1]}"
        floor = f"{facts.IMAGE_VOLUME_FLOOR[0]}.{facts.IMAGE_VOLUME_FLOOR[1]}"
        return attributes.unrefused(found, [fields.forbidden(
            f"spec.source.{sources.IMAGE}",
            f"image sources need Kubernetes {floor} or later (image volumes), and this cluster's "
            f"version {seen}; use a huggingFace, modelScope or persistentVolumeClaim source "
            f"instead")])


class NodeCounts:
    """Mutating: ``status.nodes`` is computed when read (``registry.nodecounts``), so whatever
    a write carries there (a client writing back what it read) is dropped, never stored."""

    name = "ComputedNodeCounts"

    def handles(self, write: strategy.Write) -> bool:
        return write.info.kind == KIND

    def mutate(self, write: strategy.Write) -> None:
        status = write.obj.get("status")
        if isinstance(status, dict):
            status.pop(modelartifact.NODE_COUNTS, None)


class ImmutableSpec:
    """The spec cannot change after creation (defaults considered); metadata stays mutable and
    status is the strategy's to preserve."""

    name = "ImmutableArtifactSpec"

    def handles(self, write: strategy.Write) -> bool:
        return (write.info.kind == KIND and write.operation == "UPDATE"
                and write.subresource == "" and write.old is not None)

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        old, new = write.old or {}, write.obj
        # Equal as sent means equal once defaulted too; defaulting copies, so only when they differ.
        if old.get("spec") == new.get("spec") or _defaulted_spec(old) == _defaulted_spec(new):
            return []
        return [fields.forbidden(
            "spec",
            "the spec cannot change after creation: an artifact names one set of weights; to use "
            "other weights or another revision, create a new ModelArtifact",
        )]


def _defaulted_spec(obj: dict[str, Any]) -> Any:
    body = {"spec": copy.deepcopy(obj.get("spec"))}
    defaults.apply_defaults(KIND, body)
    return body["spec"]


def _spec_rules(obj: dict[str, Any]) -> list[fields.FieldError]:
    parts = _source(obj)
    if parts is None:
        return []
    spec, source = parts
    chosen = _chosen(source)
    errors: list[fields.FieldError] = []
    if not chosen:
        errors.append(fields.required(
            "spec.source", f"set exactly one of {', '.join(sources.KINDS[:-1])} or "
            f"{sources.KINDS[-1]}"))
        return errors
    for extra in chosen[1:]:
        errors.append(fields.forbidden(
            f"spec.source.{extra}",
            f"a ModelArtifact has exactly one source, and {chosen[0]} is already set"))
    kind = chosen[0]
    member = source[kind]
    if not isinstance(member, dict):
        return errors
    if kind in sources.HUB_KINDS:
        errors.extend(_hub_rules(f"spec.source.{kind}", member))
    elif kind == sources.CLAIM:
        errors.extend(_claim_rules(f"spec.source.{sources.CLAIM}", member))
    else:
        errors.extend(_image_rules(f"spec.source.{sources.IMAGE}", member))
    if kind in sources.WHOLE_KINDS:
        whole = "a claim is mounted whole" if kind == sources.CLAIM else \
            "an image is mounted whole"
        for name in ("allowPatterns", "ignorePatterns"):
            if spec.get(name):
                errors.append(fields.forbidden(
                    f"spec.{name}",
                    f"patterns select files from a hub's listing; {whole}, so it takes none"))
        if spec.get("expectedDigest") is not None:
            identity = "the claim itself" if kind == sources.CLAIM else \
                "the digest in its reference"
            errors.append(fields.forbidden(
                "spec.expectedDigest",
                f"only a {' or '.join(sources.HUB_KINDS)} source resolves to a manifest digest;"
                f" this source's identity is {identity}"))
    for name in ("allowPatterns", "ignorePatterns"):
        errors.extend(_pattern_rules(f"spec.{name}", spec.get(name)))
    return errors


def _hub_rules(path: str, member: dict[str, Any]) -> list[fields.FieldError]:
    errors: list[fields.FieldError] = []
    repository = member.get("repository")
    if isinstance(repository, str) and not grammar.is_repository(repository):
        errors.append(fields.invalid(f"{path}.repository", repository, grammar.REPOSITORY_RULE))
    revision = member.get("revision")
    if isinstance(revision, str):
        problem = grammar.revision_problem(revision)
        if problem:
            errors.append(fields.invalid(f"{path}.revision", revision, problem))
    secret = member.get("secretRef")
    if isinstance(secret, dict):
        name = secret.get("name")
        if isinstance(name, str) and not names.is_dns_subdomain(name):
            errors.append(fields.invalid(f"{path}.secretRef.name", name, _SUBDOMAIN_RULE))
    return errors


def _claim_rules(path: str, member: dict[str, Any]) -> list[fields.FieldError]:
    errors: list[fields.FieldError] = []
    claim = member.get("claimName")
    if isinstance(claim, str) and not names.is_dns_label(claim):
        errors.append(fields.invalid(f"{path}.claimName", claim, _LABEL_RULE))
    sub = member.get("path")
    if isinstance(sub, str) and sub:
        if sub.startswith("/"):
            errors.append(fields.invalid(
                f"{path}.path", sub, "must be relative to the volume's root, without a leading "
                "'/'"))
        elif ".." in sub.split("/"):
            errors.append(fields.invalid(
                f"{path}.path", sub, "must not contain a '..' segment: it would leave the volume"))
        elif grammar.has_control(sub):
            errors.append(fields.invalid(f"{path}.path", sub,
                                         "must not contain control characters"))
    return errors


def _image_rules(path: str, member: dict[str, Any]) -> list[fields.FieldError]:
    reference = member.get("reference")
    if not isinstance(reference, str):
        return []
    name, at, digest = reference.partition("@")
    if not at:
        return [fields.invalid(f"{path}.reference", reference, _TAG_REFUSAL)]
    if not grammar.is_digest(digest):
        return [fields.invalid(
            f"{path}.reference", reference,
            "the digest after '@' must be sha256: followed by 64 lowercase hexadecimal digits")]
    if not grammar.is_image_name(name):
        return [fields.invalid(
            f"{path}.reference", reference,
            "is not an image name: [registry[:port]/]path[:tag]@sha256:<digest>, with "
            "lowercase path components")]
    return []


def _pattern_rules(path: str, patterns: Any) -> list[fields.FieldError]:
    if not isinstance(patterns, list):
        return []
    return [
        fields.invalid(f"{path}[{index}]", pattern, "must not contain control characters")
        for index, pattern in enumerate(patterns)
        if isinstance(pattern, str) and grammar.has_control(pattern)
    ]
