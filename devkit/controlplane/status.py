"""kube-apiserver's error bodies (apimachinery's errors.go and responsewriters), byte-compatible in
field names, which fields are absent, and message texts."""

from __future__ import annotations

from typing import Any

from devkit.controlplane.rbac import Attributes


class StatusError(Exception):
    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", ""))
        self.body = body

    @property
    def code(self) -> int:
        return int(self.body["code"])


def status(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def success(name: str, group: str, resource: str, uid: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = resource
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _qualified(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def _details(group: str, resource: str, name: str = "") -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return details


def unauthorized() -> dict[str, Any]:
    return status(401, "Unauthorized", "Unauthorized")


def forbidden(attrs: Attributes, reason: str = "") -> dict[str, Any]:
    who = attrs.user.name
    if not attrs.resource_request:
        text = f'User "{who}" cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        text = f'User "{who}" cannot {attrs.verb} resource "{resource}"'
        text += f' in API group "{attrs.group}"'
        text += (
            f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
        )
    if reason:
        text = f"{text}: {reason}"
    if not attrs.resource_request:
        return status(403, "Forbidden", f"forbidden: {text}", {})
    qualified = _qualified(attrs.group, attrs.resource)
    prefix = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    return status(
        403,
        "Forbidden",
        f"{prefix} is forbidden: {text}",
        _details(attrs.group, attrs.resource, attrs.name),
    )


def not_found(group: str, resource: str, name: str) -> dict[str, Any]:
    return status(
        404,
        "NotFound",
        f'{_qualified(group, resource)} "{name}" not found',
        _details(group, resource, name),
    )


def path_not_found() -> dict[str, Any]:
    return status(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group: str, resource: str, name: str) -> dict[str, Any]:
    return status(
        409,
        "AlreadyExists",
        f'{_qualified(group, resource)} "{name}" already exists',
        _details(group, resource, name),
    )


def conflict(group: str, resource: str, name: str, why: str) -> dict[str, Any]:
    return status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(group, resource)} "{name}": {why}',
        _details(group, resource, name),
    )


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(
    kind: str, group: str, name: str, field: str, kind_of_error: str, detail: str
) -> dict[str, Any]:
    cause_message = f"{kind_of_error}: {detail}"
    details = _details(group, "", name)
    details["kind"] = kind
    details["causes"] = [
        {"reason": f"Field{kind_of_error.replace(' ', '')}", "message": cause_message,
         "field": field},
    ]  # fmt: skip
    return status(
        422, "Invalid", f'{kind} "{name}" is invalid: {field}: {cause_message}', details
    )


def bad_request(message: str) -> dict[str, Any]:
    return status(400, "BadRequest", message)


def method_not_allowed(method: str, path: str) -> dict[str, Any]:
    return status(
        405, "MethodNotAllowed", f"{method} is not supported on {path}", {}
    )


def unsupported_patch() -> dict[str, Any]:
    return status(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml, application/strategic-merge-patch+json",
    )


def unsupported_body() -> dict[str, Any]:
    """A body that is not JSON (this control plane speaks no protobuf, CBOR or YAML)."""
    return status(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json",
    )


def expired(requested: int, oldest: int) -> dict[str, Any]:
    return status(410, "Expired", f"too old resource version: {requested} ({oldest})")


def internal(message: str) -> dict[str, Any]:
    return status(500, "InternalError", f"Internal error occurred: {message}", {
        "causes": [{"message": message}]
    })  # fmt: skip


def service_unavailable(message: str) -> dict[str, Any]:
    return status(503, "ServiceUnavailable", message)
