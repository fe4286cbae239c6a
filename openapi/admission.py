"""ModelArtifact admission, in process: the rules a schema cannot say, with messages in our words.

``admit_create`` and ``admit_update`` are the whole answer for a write of the main resource: they
run the schema validation first and add the admission rules, skipping a rule on a field the
schema already refused, so each field gets one clear cause.
"""

from __future__ import annotations

import copy
from typing import Any

from openapi import defaults, fields, grammar, names, sources, validation

KIND = "ModelArtifact"
# Image volumes are on by default from Kubernetes 1.35; below it the Pod would lose the volume.
IMAGE_VOLUME_FLOOR = (1, 35)

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


def admit_create(
    obj: dict[str, Any], *, cluster_version: tuple[int, int] | None = IMAGE_VOLUME_FLOOR
) -> list[fields.FieldError]:
    """Schema validation plus every admission rule for a new ModelArtifact.

    ``cluster_version`` is the (major, minor) of the cluster the workloads run on, or None when
    it cannot be read; an image source is refused below ``IMAGE_VOLUME_FLOOR`` and when unknown.
    """
    errors = validation.validate(KIND, obj)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        refused = {error.field for error in errors}
        extra = _spec_rules(spec, cluster_version)
        errors.extend(e for e in extra if not any(_covers(f, e.field) for f in refused))
    return errors


def admit_update(old: dict[str, Any], new: dict[str, Any]) -> list[fields.FieldError]:
    """Schema validation of ``new``; its spec must equal the stored one (defaults considered).

    Metadata stays mutable and status is the registry's to preserve, so neither is compared.
    """
    errors = validation.validate(KIND, new)
    # Equal as sent means equal once defaulted too; defaulting copies, so only when they differ.
    if old.get("spec") != new.get("spec") and _defaulted_spec(old) != _defaulted_spec(new):
        errors.append(fields.forbidden(
            "spec",
            "the spec cannot change after creation: an artifact names one set of weights; to use "
            "other weights or another revision, create a new ModelArtifact",
        ))
    return errors


def _defaulted_spec(obj: dict[str, Any]) -> Any:
    body = {"spec": copy.deepcopy(obj.get("spec"))}
    defaults.apply_defaults(KIND, body)
    return body["spec"]


def _covers(refused: str, field: str) -> bool:
    return field == refused or field.startswith(refused + ".") or field.startswith(refused + "[")


def _spec_rules(spec: dict[str, Any],
                cluster_version: tuple[int, int] | None) -> list[fields.FieldError]:
    source = spec.get("source")
    if not isinstance(source, dict):
        return []
    chosen = [name for name in sources.KINDS if source.get(name) is not None]
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
        errors.extend(_image_rules(f"spec.source.{sources.IMAGE}", member, cluster_version))
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


def _image_rules(path: str, member: dict[str, Any],
                 cluster_version: tuple[int, int] | None) -> list[fields.FieldError]:
    errors: list[fields.FieldError] = []
    reference = member.get("reference")
    if isinstance(reference, str):
        name, at, digest = reference.partition("@")
        if not at:
            errors.append(fields.invalid(f"{path}.reference", reference, _TAG_REFUSAL))
        elif not grammar.is_digest(digest):
            errors.append(fields.invalid(
                f"{path}.reference", reference,
                "the digest after '@' must be sha256: followed by 64 lowercase hexadecimal "
                "digits"))
        elif not grammar.is_image_name(name):
            errors.append(fields.invalid(
                f"{path}.reference", reference,
                "is not an image name: [registry[:port]/]path[:tag]@sha256:<digest>, with "
                "lowercase path components"))
    if cluster_version is None or cluster_version < IMAGE_VOLUME_FLOOR:
        seen = "could not be read" if cluster_version is None else \
            f"is {cluster_version[0]}.{cluster_version[1]}"
        floor = f"{IMAGE_VOLUME_FLOOR[0]}.{IMAGE_VOLUME_FLOOR[1]}"
        errors.append(fields.forbidden(
            path,
            f"image sources need Kubernetes {floor} or later (image volumes), and this cluster's "
            f"version {seen}; use a huggingFace, modelScope or persistentVolumeClaim source "
            f"instead"))
    return errors


def _pattern_rules(path: str, patterns: Any) -> list[fields.FieldError]:
    if not isinstance(patterns, list):
        return []
    return [
        fields.invalid(f"{path}[{index}]", pattern, "must not contain control characters")
        for index, pattern in enumerate(patterns)
        if isinstance(pattern, str) and grammar.has_control(pattern)
    ]

