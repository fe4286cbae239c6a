"""Objects from kube-apiserver into lightkube's models, as kube-apiserver really writes them.

Go writes a nil slice or map that has no ``omitempty`` as ``null``: kubelet's CSINode before any
driver registers is ``"spec": {"drivers": null}``, a Pod's watch BOOKMARK is
``"spec": {"containers": null}``. lightkube's models (msgspec Structs, from the OpenAPI) call
such a field a required list, and msgspec refuses the null. ``tolerant(model)`` is the stand-in
response type ``kube.Client`` gives lightkube for every answer it decodes: each object has its
nulls turned into ``[]``/``{}`` wherever the model holds a list or a dict that cannot be None
(found by walking ``msgspec.inspect.type_info``, once per model), then is decoded with the model
(absent optional fields and unknown fields are fine already). A BOOKMARK with nothing but
metadata, for a model that requires more, becomes a ``Bookmark``.

An object that still does not fit becomes an ``Undecodable`` placeholder instead of failing the
whole list or watch: ``kube.Client`` drops it, calls ``skipped`` (a warning once per resource
and name, with the failing field path from msgspec's message, never the object's content: it
may be a Secret) and counts it in ``UNDECODABLE``; a ``get`` raises ``errors.Undecodable``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

import msgspec
import prometheus_client
from lightkube.core import resource as lk_resource
from lightkube.models.meta_v1 import ObjectMeta

log = logging.getLogger(__name__)

UNDECODABLE = prometheus_client.Counter(
    "gpustack_model_manager_kube_client_undecodable_objects",
    "Objects from kube-apiserver that did not fit the client's model and were skipped, "
    "counted each time one is skipped (a relist skips it again).",
    ["resource"],
)
REPORTED_LIMIT = 4096
REASON_LIMIT = 300

_BOOKMARK_KEYS = frozenset({"kind", "apiVersion", "metadata"})


def plain(obj: Any) -> dict[str, Any]:
    """An object this client returned as the wire's plain dict: a lightkube model through its
    ``to_dict``, a generic resource (already a dict) copied."""
    if isinstance(obj, dict):
        return dict(obj)
    to_dict = getattr(obj, "to_dict", None)
    return dict(to_dict()) if callable(to_dict) else {}


class Bookmark(dict[str, Any]):
    """A watch BOOKMARK for a resource whose model cannot be built from metadata alone."""

    @property
    def metadata(self) -> ObjectMeta:
        meta = self.get("metadata") or {}
        return ObjectMeta(resourceVersion=meta.get("resourceVersion"),
                          annotations=meta.get("annotations"))

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Undecodable:
    """What stands in for an object the model refuses: who it is and why, and (for lightkube's
    watch driver, which resumes from the last object's version) its ``metadata``."""

    resource: str
    namespace: str
    name: str
    reason: str
    metadata: ObjectMeta

    @property
    def key(self) -> str:
        name = self.name or "(unnamed)"
        return f"{self.namespace}/{name}" if self.namespace else name


# --- nulls where Go writes nil ---------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Struct:
    fields: list[tuple[str, _Slot]]


@dataclasses.dataclass(frozen=True, slots=True)
class _Items:
    """A list's items or a dict's values."""

    slot: _Slot


@dataclasses.dataclass(frozen=True, slots=True)
class _Slot:
    """One place in an object: ``empty`` builds what replaces a null there (None: a null is
    fine or nothing can replace it); ``inner`` fixes what is inside the value."""

    empty: type[list[Any]] | type[dict[str, Any]] | None
    inner: _Struct | _Items | None


_STRUCTS: dict[type[Any], _Struct | None] = {}


def _slot(info: Any) -> _Slot | None:
    empty: type[list[Any]] | type[dict[str, Any]] | None = None
    inner: _Struct | _Items | None = None
    if isinstance(info, msgspec.inspect.ListType):
        empty, inner = list, _items(info.item_type)
    elif isinstance(info, msgspec.inspect.DictType):
        empty, inner = dict, _items(info.value_type)
    elif isinstance(info, msgspec.inspect.StructType):
        inner = _struct(info)
    elif isinstance(info, msgspec.inspect.UnionType):
        # Optional[X]: null is fine, but what X holds may still need fixing.
        members = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        found = _slot(members[0]) if len(members) == 1 else None
        inner = found.inner if found is not None else None
    if empty is None and inner is None:
        return None
    return _Slot(empty, inner)


def _items(info: Any) -> _Items | None:
    slot = _slot(info)
    return _Items(slot) if slot is not None else None


def _struct(info: msgspec.inspect.StructType) -> _Struct | None:
    if info.cls in _STRUCTS:
        return _STRUCTS[info.cls]
    node = _Struct([])
    _STRUCTS[info.cls] = node  # a recursive model meets itself here
    for field in info.fields:
        slot = _slot(field.type)
        if slot is not None:
            node.fields.append((field.encode_name, slot))
    if not node.fields:
        _STRUCTS[info.cls] = None
        return None
    return node


def _plan(model: type[Any]) -> _Struct | None:
    if model not in _STRUCTS:
        info = msgspec.inspect.type_info(model)
        if not isinstance(info, msgspec.inspect.StructType):
            return None
        _struct(info)
    return _STRUCTS[model]


def _fill(slot: _Slot, value: Any) -> Any:
    if value is None:
        return slot.empty() if slot.empty is not None else None
    inner = slot.inner
    if isinstance(inner, _Struct):
        if isinstance(value, dict):
            _fill_struct(inner, value)
    elif inner is not None:
        if isinstance(value, list):
            value[:] = [_fill(inner.slot, item) for item in value]
        elif isinstance(value, dict):
            for key, item in value.items():
                value[key] = _fill(inner.slot, item)
    return value


def _fill_struct(node: _Struct, value: dict[str, Any]) -> None:
    for name, slot in node.fields:
        if name in value:
            value[name] = _fill(slot, value[name])


def fill_nulls(model: type[Any], data: Any) -> Any:
    """``data`` (parsed JSON, changed in place) with a null replaced by ``[]`` or ``{}``
    wherever ``model`` holds a list or a dict that cannot be None, at any depth."""
    plan = _plan(model)
    if plan is not None and isinstance(data, dict):
        _fill_struct(plan, data)
    return data


# --- the response type -----------------------------------------------------------------------


def resource_name(res: type[Any]) -> str:
    """kube's name for the resource: ``pods``, ``csinodes.storage.k8s.io``."""
    try:
        info = lk_resource.api_info(res)
    except AttributeError:
        return res.__name__
    group = info.resource.group
    return f"{info.plural}.{group}" if group else str(info.plural)


def decode(model: type[Any], data: Any) -> Any:
    """One object: the model's instance, a ``Bookmark``, or an ``Undecodable``."""
    try:
        return msgspec.convert(fill_nulls(model, data), model)  # lightkube's from_dict
    except msgspec.ValidationError as exc:
        if isinstance(data, dict) and set(data) <= _BOOKMARK_KEYS:
            return Bookmark(data)
        return _undecodable(model, data, exc)


_TOLERANT: dict[type[Any], type[Any]] = {}


def tolerant(model: type[Any]) -> type[Any]:
    """The response type for lightkube's decoders in place of ``model``: lightkube decodes JSON
    and calls it with each object (as it does for a dict resource), and gets ``decode``'s
    answer. A dict resource (our generic ones) decodes anything and stays as it is."""
    if not isinstance(model, type) or not issubclass(model, msgspec.Struct):
        return model
    found = _TOLERANT.get(model)
    if found is None:

        class Tolerant(dict[str, Any]):
            def __new__(cls, data: Any) -> Any:
                return decode(model, data)

        Tolerant.__name__ = Tolerant.__qualname__ = model.__name__  # lightkube names lists by it
        found = _TOLERANT[model] = Tolerant
    return found


# --- what could not be decoded ---------------------------------------------------------------


_QUOTED = re.compile(r"'[^']*'")


def _undecodable(model: type[Any], data: Any, exc: msgspec.ValidationError) -> Undecodable:
    meta = data.get("metadata") if isinstance(data, dict) else None
    meta = meta if isinstance(meta, dict) else {}

    def text(key: str) -> str:
        value = meta.get(key)
        return value if isinstance(value, str) else ""

    # msgspec names the type and the path; an enum or literal error also quotes the value.
    reason = _QUOTED.sub("'...'", str(exc))[:REASON_LIMIT]
    return Undecodable(resource_name(model), text("namespace")[:253], text("name")[:253], reason,
                       ObjectMeta(resourceVersion=text("resourceVersion") or None))


_reported: set[tuple[str, str]] = set()


def skipped(item: Undecodable) -> None:
    """Count a skipped object; warn the first time this resource and name is skipped."""
    UNDECODABLE.labels(item.resource).inc()
    key = (item.resource, item.key)
    if key in _reported:
        return
    if len(_reported) >= REPORTED_LIMIT:
        _reported.clear()
    _reported.add(key)
    log.warning("%s %s skipped: it does not fit the client's model (%s)", item.resource,
                item.key, item.reason)
