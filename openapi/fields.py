"""Field-path errors shaped like Kubernetes' ``field.Error``, and the 422 message they make."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

ErrorType = Literal[
    "FieldValueRequired",
    "FieldValueInvalid",
    "FieldValueNotSupported",
    "FieldValueForbidden",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueDuplicate",
]


MAX_RENDERED = 256
"""Characters of a value a message shows; the rest is cut (a message never echoes a whole
annotation, a 100 KiB finalizer or a nested structure)."""
MAX_PATH = 512
"""Characters of a field path kept in a cause (paths hold user-chosen map keys)."""
MAX_CAUSES = 100
"""Field errors one refusal reports; the rest are counted in a last cause."""


def render(value: Any, limit: int = MAX_RENDERED) -> str:
    """A value as Kubernetes prints it in a message: strings quoted, numbers bare, structures as
    compact JSON; cut after ``limit`` characters, at a cost bounded by ``limit`` too."""
    if isinstance(value, str):
        if len(value) <= limit:
            return _quote(value)
        return f"{_quote(value[:limit])}... ({len(value)} characters, cut)"
    pieces: list[str] = []
    size = 0
    # an explicit stack: no recursion, and rendering stops once the limit is passed
    stack: list[Any] = [value]
    while stack and size <= limit:
        item = stack.pop()
        if isinstance(item, _Text):
            piece = item.text
        elif isinstance(item, dict):
            piece = "{"
            # keys sorted as json.Marshal sorts them, among the first few only: bounded cost
            entries = sorted(itertools.islice(item.items(), limit + 1),
                             key=lambda pair: str(pair[0]))
            stack.append(_Text("}"))
            for index in range(len(entries) - 1, -1, -1):
                key, child = entries[index]
                stack.append(child)
                stack.append(_Text(("," if index else "") + _quote(str(key)[:limit]) + ":"))
        elif isinstance(item, list | tuple):
            piece = "["
            stack.append(_Text("]"))
            children = list(item[: limit + 1])
            for index in range(len(children) - 1, -1, -1):
                stack.append(children[index])
                if index:
                    stack.append(_Text(","))
        else:
            piece = _scalar(item, limit)
        pieces.append(piece)
        size += len(piece)
    text = "".join(pieces)
    if size > limit or stack:
        return text[:limit] + "... (cut)"
    return text


class _Text:
    """Already-rendered punctuation on the rendering stack."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _scalar(value: Any, limit: int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        if value.bit_length() > 3 * limit:  # str() of a huge int is slow, or refused outright
            return f"<an integer of about {value.bit_length() * 3 // 10} digits>"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return render(value, limit)
    return _quote(str(value)[:limit])


def cut(text: str, limit: int = MAX_RENDERED) -> str:
    """``text`` as is, or its first ``limit`` characters and a mark, for messages that show a
    value unquoted (as kube's do for names and kinds)."""
    return text if len(text) <= limit else text[:limit] + "... (cut)"


def shown(value: Any) -> str:
    """A string cut, anything else rendered: for messages that print a string bare."""
    return cut(value) if isinstance(value, str) else render(value)


def cut_path(path: str) -> str:
    """A field path no longer than ``MAX_PATH``."""
    return path if len(path) <= MAX_PATH else path[:MAX_PATH] + "..."


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

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def required(field: str, detail: str = "") -> FieldError:
    message = "Required value" + (f": {detail}" if detail else "")
    return FieldError(cut_path(field), "FieldValueRequired", message)


def invalid(field: str, value: Any, detail: str) -> FieldError:
    message = f"Invalid value: {render(value)}: {detail}"
    return FieldError(cut_path(field), "FieldValueInvalid", message, value)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    choices = ", ".join(render(choice) for choice in supported)
    message = f"Unsupported value: {render(value)}: supported values: {choices}"
    return FieldError(cut_path(field), "FieldValueNotSupported", message, value)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError(cut_path(field), "FieldValueForbidden", f"Forbidden: {detail}")


def too_long(field: str, value: Any, limit: int, unit: str = "characters") -> FieldError:
    """Like kube's ``TooLong``, the value itself is never shown."""
    message = f"Too long: may not be more than {limit} {unit}"
    return FieldError(cut_path(field), "FieldValueTooLong", message, value)


def too_many(field: str, count: int, limit: int) -> FieldError:
    message = f"Too many: {count}: must have at most {limit} items"
    return FieldError(cut_path(field), "FieldValueTooMany", message, count)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError(cut_path(field), "FieldValueDuplicate",
                      f"Duplicate value: {render(value)}", value)


def bounded(errors: Sequence[FieldError]) -> list[FieldError]:
    """At most ``MAX_CAUSES`` errors; past that, the first ones and a count of the rest."""
    if len(errors) <= MAX_CAUSES:
        return list(errors)
    kept = list(errors[: MAX_CAUSES - 1])
    rest = len(errors) - len(kept)
    kept.append(FieldError("", "FieldValueInvalid", f"and {rest} more errors, not listed"))
    return kept


def invalid_message(kind: str, group: str, name: str, errors: Sequence[FieldError]) -> str:
    """The 422 ``Status.message``: ``Kind.group "name" is invalid: <one>`` or ``[<a>, <b>]``."""
    listed = [str(error) if error.field else error.message for error in bounded(errors)]
    joined = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    return f'{kind}.{group} {render(str(name))} is invalid: {joined}'

