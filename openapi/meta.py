"""The shared ``io.k8s.apimachinery.pkg.apis.meta.v1`` definitions our schemas refer to.

The shapes follow upstream (field names, types, formats, list markers) so that clients and the
aggregator read them as the metadata they know; the descriptions are ours.
"""

from __future__ import annotations

from typing import Any

PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = PREFIX + "ObjectMeta"
LIST_META = PREFIX + "ListMeta"
TIME = PREFIX + "Time"
STATUS = PREFIX + "Status"
DELETE_OPTIONS = PREFIX + "DeleteOptions"
WATCH_EVENT = PREFIX + "WatchEvent"
PATCH = PREFIX + "Patch"

# The canonical reference form; documents rewrite it to ``#/definitions/`` for Swagger 2.0.
REF_PREFIX = "#/components/schemas/"


def ref(name: str) -> dict[str, Any]:
    return {"$ref": REF_PREFIX + name}


def ref_with(name: str, description: str, **extra: Any) -> dict[str, Any]:
    """A reference carrying its own description, wrapped in ``allOf`` as upstream v3 does."""
    return {"allOf": [ref(name)], "description": description, **extra}


def _string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _int(description: str, fmt: str = "int64") -> dict[str, Any]:
    return {"type": "integer", "format": fmt, "description": description}


def _bool(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def _string_map(description: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"type": "string", "default": ""},
            "description": description}


DEFINITIONS: dict[str, dict[str, Any]] = {
    TIME: {
        "type": "string",
        "format": "date-time",
        "description": "An RFC 3339 timestamp in UTC, to the second.",
    },
    PREFIX + "FieldsV1": {
        "type": "object",
        "description": "The set of fields a manager owns, in the FieldsV1 encoding.",
    },
    PREFIX + "ManagedFieldsEntry": {
        "type": "object",
        "description": "Which manager set which fields, and through which operation.",
        "properties": {
            "apiVersion": _string("The API version of the fields this entry tracks."),
            "fieldsType": _string("The encoding of fieldsV1; only FieldsV1 is defined."),
            "fieldsV1": ref_with(PREFIX + "FieldsV1", "The owned fields."),
            "manager": _string("The name of the workflow that manages the fields."),
            "operation": _string("Apply or Update."),
            "subresource": _string("The subresource the operation went through, if any."),
            "time": ref_with(TIME, "When the entry last changed."),
        },
    },
    PREFIX + "OwnerReference": {
        "type": "object",
        "description": "An object this one depends on; the garbage collector follows it.",
        "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {
            "apiVersion": _string("The owner's API version.", default=""),
            "blockOwnerDeletion": _bool("Foreground deletion of the owner waits for this object."),
            "controller": _bool("The owner is the managing controller."),
            "kind": _string("The owner's kind.", default=""),
            "name": _string("The owner's name.", default=""),
            "uid": _string("The owner's UID.", default=""),
        },
        "x-kubernetes-map-type": "atomic",
    },
    OBJECT_META: {
        "type": "object",
        "description": "Metadata every persisted object carries.",
        "properties": {
            "annotations": _string_map("Free-form key/value notes for tools; not selectable."),
            "creationTimestamp": ref_with(TIME, "When the server created the object."),
            "deletionGracePeriodSeconds": _int("Seconds granted for graceful deletion."),
            "deletionTimestamp": ref_with(TIME, "When deletion was requested; set by the server."),
            "finalizers": {
                "type": "array",
                "items": {"type": "string", "default": ""},
                "description": "Conditions that must clear before the object is removed.",
                "x-kubernetes-list-type": "set",
                "x-kubernetes-patch-strategy": "merge",
            },
            "generateName": _string("A prefix from which the server makes a unique name."),
            "generation": _int("Bumped by the server on every change of the desired state."),
            "labels": _string_map("Key/value pairs for selecting and grouping objects."),
            "managedFields": {
                "type": "array",
                "items": ref_with(PREFIX + "ManagedFieldsEntry", "One manager's fields."),
                "description": "Field ownership, maintained by the server.",
                "x-kubernetes-list-type": "atomic",
            },
            "name": _string("Unique within a namespace; cannot be changed."),
            "namespace": _string("The namespace of a namespaced object."),
            "ownerReferences": {
                "type": "array",
                "items": ref_with(PREFIX + "OwnerReference", "One owner."),
                "description": "The objects this one depends on.",
                "x-kubernetes-list-map-keys": ["uid"],
                "x-kubernetes-list-type": "map",
                "x-kubernetes-patch-merge-key": "uid",
                "x-kubernetes-patch-strategy": "merge",
            },
            "resourceVersion": _string("An opaque version for optimistic concurrency."),
            "selfLink": _string("Deprecated and never set."),
            "uid": _string("Unique in time and space; set by the server."),
        },
    },
    LIST_META: {
        "type": "object",
        "description": "Metadata of a list response.",
        "properties": {
            "continue": _string("A token for the next page, when the list was limited."),
            "remainingItemCount": _int("Items left after this page, when known."),
            "resourceVersion": _string("The version of the store the list was read at."),
            "selfLink": _string("Deprecated and never set."),
        },
    },
    PREFIX + "StatusCause": {
        "type": "object",
        "description": "One reason a request failed, often naming a field.",
        "properties": {
            "field": _string("The field at fault, as a dotted path."),
            "message": _string("What was wrong, for a human."),
            "reason": _string("A machine-readable cause."),
        },
    },
    PREFIX + "StatusDetails": {
        "type": "object",
        "description": "What the failure concerned.",
        "properties": {
            "causes": {
                "type": "array",
                "items": ref_with(PREFIX + "StatusCause", "One cause."),
                "description": "Field-level causes.",
                "x-kubernetes-list-type": "atomic",
            },
            "group": _string("The API group of the resource."),
            "kind": _string("The kind or resource concerned."),
            "name": _string("The object's name, when one was concerned."),
            "retryAfterSeconds": _int("Seconds to wait before retrying.", "int32"),
            "uid": _string("The object's UID, when known."),
        },
    },
    STATUS: {
        "type": "object",
        "description": "The outcome of a call that returns no object, usually a failure.",
        "properties": {
            "apiVersion": _string("v1"),
            "code": _int("The HTTP status code.", "int32"),
            "details": ref_with(PREFIX + "StatusDetails", "Extra data about the failure."),
            "kind": _string("Status"),
            "message": _string("A human-readable account of the outcome."),
            "metadata": ref_with(LIST_META, "List metadata; usually empty.", default={}),
            "reason": _string("A machine-readable reason, such as NotFound or Invalid."),
            "status": _string("Success or Failure."),
        },
        "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}],
    },
    PREFIX + "Preconditions": {
        "type": "object",
        "description": "What must still hold for the delete to proceed.",
        "properties": {
            "resourceVersion": _string("The expected resourceVersion."),
            "uid": _string("The expected UID."),
        },
    },
    DELETE_OPTIONS: {
        "type": "object",
        "description": "Options of a delete request.",
        "properties": {
            "apiVersion": _string("v1 or meta.k8s.io/v1."),
            "dryRun": {
                "type": "array",
                "items": {"type": "string", "default": ""},
                "description": "All: check the request without persisting it.",
                "x-kubernetes-list-type": "atomic",
            },
            "gracePeriodSeconds": _int("Seconds before the object is deleted."),
            "kind": _string("DeleteOptions"),
            "orphanDependents": _bool("Deprecated: use propagationPolicy."),
            "preconditions": ref_with(PREFIX + "Preconditions", "What must still hold."),
            "propagationPolicy": _string("Orphan, Background or Foreground."),
        },
        "x-kubernetes-group-version-kind": [
            {"group": "", "kind": "DeleteOptions", "version": "v1"},
            {"group": "meta.k8s.io", "kind": "DeleteOptions", "version": "v1"},
        ],
    },
    PREFIX + "RawExtension": {
        "type": "object",
        "description": "An embedded object of any kind.",
    },
    WATCH_EVENT: {
        "type": "object",
        "description": "One event of a watch stream.",
        "required": ["type", "object"],
        "properties": {
            "object": ref_with(PREFIX + "RawExtension", "The object, or a Status for ERROR."),
            "type": _string("ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.", default=""),
        },
        "x-kubernetes-group-version-kind": [
            {"group": "", "kind": "WatchEvent", "version": "v1"},
            {"group": "meta.k8s.io", "kind": "WatchEvent", "version": "v1"},
        ],
    },
    PATCH: {
        "type": "object",
        "description": "A JSON patch or a JSON merge patch body.",
    },
}
