"""ObjectMeta validation, as kube-apiserver's ``ValidateObjectMeta`` does it, in one place.

Types first, from the ``ObjectMeta`` schema of ``openapi.meta`` (a name that is a number, labels
that are a list, ``ownerReferences`` that is a string, a ``managedFields`` entry that is not an
object); then, for the fields whose type is right, the rules a schema cannot say: names and
generated-name prefixes, label and annotation keys and values, the 256 KiB annotation total,
finalizer names, owner references and managed-field entries. Namespaces and the server-set fields
are the registry's. The registry runs ``validate`` once per write, on the metadata as sent,
before anything else reads it.
"""

from __future__ import annotations

from typing import Any

from openapi import fields, meta, names, validation

TOTAL_ANNOTATION_BYTES = 256 * 1024
FIELD_MANAGER_MAX = 128
SUBRESOURCE_MAX = 256
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
MANAGED_FIELDS_OPERATIONS = ("Apply", "Update")
# kube refuses these as owners: an Event never owns anything
_BANNED_OWNERS = (("v1", "Event"),)

_SCHEMA = meta.ref(meta.OBJECT_META)


def check_types(metadata: Any) -> list[fields.FieldError]:
    """Type errors only (``metadata`` absent or null counts as empty)."""
    if metadata is None:
        return []
    return validation.check(_SCHEMA, metadata, "metadata", unique=False)


def validate(metadata: Any) -> list[fields.FieldError]:
    """Every problem of ``metadata``: types, then the rules of each well-typed field."""
    problems = check_types(metadata)
    if not isinstance(metadata, dict):
        return problems
    refused = {problem.field for problem in problems}

    def typed(name: str) -> bool:
        path = f"metadata.{name}"
        return metadata.get(name) is not None and not any(
            field == path or field.startswith((path + ".", path + "[")) for field in refused)

    if typed("name") and metadata["name"]:
        problems.extend(name_problems("metadata.name", metadata["name"]))
    if typed("generateName") and metadata["generateName"]:
        problems.extend(name_problems("metadata.generateName", metadata["generateName"],
                                      prefix=True))
    if typed("labels"):
        problems.extend(_labels(metadata["labels"]))
    if typed("annotations"):
        problems.extend(_annotations(metadata["annotations"]))
    if typed("finalizers"):
        problems.extend(_finalizers(metadata["finalizers"]))
    if typed("ownerReferences"):
        problems.extend(_owners(metadata["ownerReferences"]))
    if typed("managedFields"):
        problems.extend(_managed_fields(metadata["managedFields"]))
    if typed("generation") and metadata["generation"] < 0:
        problems.append(fields.invalid("metadata.generation", metadata["generation"],
                                       "must be greater than or equal to 0"))
    return problems


def name_problems(path: str, name: str, *, prefix: bool = False) -> list[fields.FieldError]:
    """An object name (or a ``generateName`` prefix): a path segment and a DNS-1123 subdomain."""
    if name in (".", ".."):
        return [fields.invalid(path, name, "may not be '.' or '..'")]
    if "/" in name or "%" in name:
        return [fields.invalid(path, name, "may not contain '/' or '%'")]
    if prefix and len(name) > 1 and name.endswith("-"):
        name = name[:-1] + "a"  # a prefix may end in '-': the generated suffix follows it
    return [fields.invalid(path, name, problem) for problem in names.dns_subdomain_problems(name)]


def _labels(labels: dict[str, str]) -> list[fields.FieldError]:
    problems: list[fields.FieldError] = []
    for key, value in labels.items():
        problems.extend(fields.invalid("metadata.labels", key, problem)
                        for problem in names.qualified_name_problems(key))
        problems.extend(fields.invalid(f"metadata.labels[{key}]", value, problem)
                        for problem in names.label_value_problems(value))
    return problems


def _annotations(annotations: dict[str, str]) -> list[fields.FieldError]:
    problems: list[fields.FieldError] = []
    size = 0
    for key, value in annotations.items():
        # kube lower-cases annotation keys before checking them
        problems.extend(fields.invalid("metadata.annotations", key, problem)
                        for problem in names.qualified_name_problems(key.lower()))
        size += len(key.encode()) + len(value.encode())
    if size > TOTAL_ANNOTATION_BYTES:
        problems.append(fields.too_long("metadata.annotations", "", TOTAL_ANNOTATION_BYTES,
                                        "bytes"))
    return problems


def _finalizers(finalizers: list[str]) -> list[fields.FieldError]:
    problems: list[fields.FieldError] = []
    for index, finalizer in enumerate(finalizers):
        problems.extend(fields.invalid(f"metadata.finalizers[{index}]", finalizer, problem)
                        for problem in names.qualified_name_problems(finalizer))
    if ORPHAN in finalizers and FOREGROUND in finalizers:
        problems.append(fields.invalid("metadata.finalizers", finalizers,
                                       f"finalizer {FOREGROUND} and {ORPHAN} cannot be both set"))
    return problems


def _owners(owners: list[dict[str, Any]]) -> list[fields.FieldError]:
    problems: list[fields.FieldError] = []
    controllers = []
    for index, owner in enumerate(owners):
        path = f"metadata.ownerReferences[{index}]"
        api_version, kind = owner.get("apiVersion") or "", owner.get("kind") or ""
        version = api_version.rpartition("/")[2]
        if not version:
            problems.append(fields.invalid(f"{path}.apiVersion", api_version,
                                           "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not owner.get(key):
                problems.append(fields.invalid(f"{path}.{key}", owner.get(key) or "",
                                               f"{key} must not be empty"))
        if (api_version, kind) in _BANNED_OWNERS:
            problems.append(fields.invalid(path, owner,
                                           f"{api_version}, Kind={kind} is disallowed from being"
                                           " an owner"))
        if owner.get("controller") is True:
            controllers.append(str(owner.get("name") or ""))
    if len(controllers) > 1:
        listed = ", ".join(fields.render(name) for name in controllers[:8])
        problems.append(fields.invalid(
            "metadata.ownerReferences", owners,
            f"Only one reference can have Controller set to true. Found \"true\" in references "
            f"for {listed}"))
    return problems


def _managed_fields(entries: list[dict[str, Any]]) -> list[fields.FieldError]:
    problems: list[fields.FieldError] = []
    for index, entry in enumerate(entries):
        path = f"metadata.managedFields[{index}]"
        operation = entry.get("operation")
        if operation not in MANAGED_FIELDS_OPERATIONS:
            problems.append(fields.invalid(f"{path}.operation", operation or "",
                                           "must be `Apply` or `Update`"))
        fields_type = entry.get("fieldsType")
        if fields_type and fields_type != "FieldsV1":
            problems.append(fields.invalid(f"{path}.fieldsType", fields_type,
                                           "must be `FieldsV1`"))
        manager = entry.get("manager") or ""
        if len(manager) > FIELD_MANAGER_MAX:
            problems.append(fields.too_long(f"{path}.manager", manager, FIELD_MANAGER_MAX))
        elif not manager.isprintable():
            problems.append(fields.invalid(f"{path}.manager", manager, "invalid characters"))
        subresource = entry.get("subresource") or ""
        if len(subresource) > SUBRESOURCE_MAX:
            problems.append(fields.too_long(f"{path}.subresource", subresource,
                                            SUBRESOURCE_MAX))
    return problems
