"""Field-path errors shaped like Kubernetes' ``field.Error``, and the 422 message they make."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypedDict

ErrorType = Literal[
    "FieldValueRequired",
    "FieldValueInvalid",
    "FieldValueNotSupported",
    "FieldValueForbidden",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueDuplicate",
]


class Cause(TypedDict):
    type: str
    message: str
    field: str


def render(value: Any) -> str:
    """A value as Kubernetes prints it in a message: strings quoted, numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclasses.dataclass(frozen=True, slots=True)
class FieldError:
    """One refusal: the dotted ``field`` path, its ``type`` and the whole cause ``message``.

    ``message`` is already the text a client sees after the path, e.g.
    ``Invalid value: "x": must be owner/name``. Build errors with the helpers below so the
    prefixes match what kubectl users know.
    """

    field: str
    type: ErrorType
    message: str
    value: Any = None

    def cause(self) -> Cause:
        return {"type": self.type, "message": self.message, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def required(field: str, detail: str = "") -> FieldError:
    message = "Required value" + (f": {detail}" if detail else "")
    return FieldError(field, "FieldValueRequired", message)


def invalid(field: str, value: Any, detail: str) -> FieldError:
    message = f"Invalid value: {render(value)}: {detail}"
    return FieldError(field, "FieldValueInvalid", message, value)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    choices = ", ".join(render(choice) for choice in supported)
    message = f"Unsupported value: {render(value)}: supported values: {choices}"
    return FieldError(field, "FieldValueNotSupported", message, value)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError(field, "FieldValueForbidden", f"Forbidden: {detail}")


def too_long(field: str, value: Any, limit: int) -> FieldError:
    message = f"Too long: may not be more than {limit} characters"
    return FieldError(field, "FieldValueTooLong", message, value)


def too_many(field: str, count: int, limit: int) -> FieldError:
    message = f"Too many: {count}: must have at most {limit} items"
    return FieldError(field, "FieldValueTooMany", message, count)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError(field, "FieldValueDuplicate", f"Duplicate value: {render(value)}", value)


def invalid_message(kind: str, group: str, name: str, errors: Sequence[FieldError]) -> str:
    """The 422 ``Status.message``: ``Kind.group "name" is invalid: <one>`` or ``[<a>, <b>]``."""
    listed = [str(error) for error in errors]
    joined = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    return f'{kind}.{group} "{name}" is invalid: {joined}'


def causes(errors: Iterable[FieldError]) -> list[Cause]:
    return [error.cause() for error in errors]
