"""The control plane's objects: one revision counter for everything (like etcd), optimistic
concurrency on ``metadata.resourceVersion``, finalizers, and an event history that watches read
and that ``compact`` can cut (older revisions then answer 410)."""

from __future__ import annotations

import base64
import bisect
import builtins
import dataclasses
import datetime
import secrets
import threading
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from devkit.controlplane import status
from devkit.controlplane.resources import CSINODES, NAMESPACES, PODS, PVCS, Kind
from openapi import wire

HISTORY = 10_000
_NAME = "abcdefghijklmnopqrstuvwxyz0123456789"


def _copy(obj: wire.Obj) -> wire.Obj:
    copied: wire.Obj = orjson.loads(orjson.dumps(obj))
    return copied


def _ordered(obj: wire.Obj) -> wire.Obj:
    """kube's field order: kind, apiVersion, metadata, then the rest as given."""
    head: wire.Obj = {k: obj[k] for k in ("kind", "apiVersion", "metadata") if k in obj}
    head.update((k, v) for k, v in obj.items() if k not in head)
    return head


def _nil_lists(kind: Kind, obj: wire.Obj) -> wire.Obj:
    """What Go's JSON encoding writes for an empty list without ``omitempty``: kube-apiserver
    answers a CSINode whose ``spec.drivers`` was sent empty, null or not at all with
    ``"spec": {"drivers": null}`` (kube-samples/csinode-no-drivers.json)."""
    if kind is CSINODES:
        spec = obj.get("spec")
        spec = dict(spec) if isinstance(spec, dict) else {}
        spec["drivers"] = spec.get("drivers") or None
        obj["spec"] = spec
    return obj


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True)
class Event:
    revision: int
    kind: tuple[str, str]
    type: str  # ADDED, MODIFIED, DELETED
    object: wire.Obj
    previous: wire.Obj | None


def _valid_name(name: str) -> bool:
    if not name or len(name) > 253 or name.strip("abcdefghijklmnopqrstuvwxyz0123456789-.") != "":
        return False
    return name[0].isalnum() and name[-1].isalnum()


class Store:
    def __init__(self, *, first_revision: int = 1000) -> None:
        self.cond = threading.Condition()
        self._revision = first_revision
        self._objects: dict[tuple[str, str], dict[tuple[str, str], wire.Obj]] = {}
        self._events: list[Event] = []
        self._revisions: list[int] = []
        self._compacted = 0
        self.closed = False

    # --- reading ---------------------------------------------------------------------

    @property
    def revision(self) -> int:
        with self.cond:
            return self._revision

    @property
    def compacted(self) -> int:
        with self.cond:
            return self._compacted

    def get(self, kind: Kind, namespace: str, name: str) -> wire.Obj:
        with self.cond:
            obj = self._objects.get(kind.key, {}).get((namespace, name))
            if obj is None:
                raise status.StatusError(status.not_found(kind.group, kind.plural, name))
            return _copy(obj)

    def find(self, kind: Kind, namespace: str, name: str) -> wire.Obj | None:
        with self.cond:
            obj = self._objects.get(kind.key, {}).get((namespace, name))
            return None if obj is None else _copy(obj)

    def list(
        self, kind: Kind, namespace: str, match: Callable[[wire.Obj], bool]
    ) -> tuple[builtins.list[wire.Obj], int]:
        with self.cond:
            table = self._objects.get(kind.key, {})
            keys = sorted(k for k in table if not namespace or k[0] == namespace)
            items = [_copy(table[k]) for k in keys if match(table[k])]
            return items, self._revision

    def events_after(self, kind: Kind, revision: int) -> builtins.list[Event]:
        """Events of ``kind`` after ``revision``; raises 410 when that history is compacted."""
        with self.cond:
            if revision < self._compacted:
                raise status.StatusError(status.expired(revision, self._compacted + 1))
            start = bisect.bisect_right(self._revisions, revision)
            return [e for e in self._events[start:] if e.kind == kind.key]

    # --- writing ---------------------------------------------------------------------

    def _record(self, kind: Kind, type_: str, obj: wire.Obj, previous: wire.Obj | None) -> None:
        self._events.append(Event(self._revision, kind.key, type_, _copy(obj), previous))
        self._revisions.append(self._revision)
        if len(self._events) > HISTORY:
            drop = len(self._events) - HISTORY
            self._compacted = self._events[drop - 1].revision
            del self._events[:drop]
            del self._revisions[:drop]
        self.cond.notify_all()

    def _bump(self, obj: wire.Obj) -> None:
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)

    def compact(self) -> int:
        """Forget the history up to now: a watch from an older revision answers 410."""
        with self.cond:
            self._compacted = self._revision
            self._events.clear()
            self._revisions.clear()
            self.cond.notify_all()
            return self._revision

    def create(self, kind: Kind, namespace: str, body: wire.Obj, *, seed: bool = False) -> wire.Obj:
        obj = _copy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise status.StatusError(status.bad_request("metadata must be an object"))
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = str(meta["generateName"]) + "".join(secrets.choice(_NAME) for _ in range(5))
        if not name:
            raise status.StatusError(status.invalid(
                kind.kind, kind.group, "", "metadata.name", "Required value",
                "name or generateName is required",
            ))  # fmt: skip
        if not _valid_name(name):
            raise status.StatusError(status.invalid(
                kind.kind, kind.group, name[:64], "metadata.name", "Invalid value",
                f'"{name[:64]}": a lowercase RFC 1123 subdomain must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            ))  # fmt: skip
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        meta["name"] = name
        if kind.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        with self.cond:
            table = self._objects.setdefault(kind.key, {})
            if (namespace, name) in table:
                raise status.StatusError(status.already_exists(kind.group, kind.plural, name))
            if kind.namespaced and (
                ("", namespace) not in self._objects.get(NAMESPACES.key, {})
            ):
                if not seed:
                    raise status.StatusError(status.not_found("", "namespaces", namespace))
                self._create_namespace(namespace)
            if not seed or "uid" not in meta:
                meta["uid"] = str(uuid.uuid4())
            if not seed or "creationTimestamp" not in meta:
                meta["creationTimestamp"] = _now()
            for transient in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(transient, None)
            if kind is PODS and not seed:
                meta["generation"] = 1
                obj["status"] = {"phase": "Pending"}
            if kind is PVCS and not seed:
                obj["status"] = {"phase": "Pending"}
            if kind is NAMESPACES and not seed:
                obj.setdefault("spec", {"finalizers": ["kubernetes"]})
                obj["status"] = {"phase": "Active"}
            obj = _ordered(_nil_lists(kind, obj))
            self._bump(obj)
            table[(namespace, name)] = obj
            self._record(kind, "ADDED", obj, None)
            return _copy(obj)

    def _create_namespace(self, namespace: str) -> None:
        obj: wire.Obj = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace, "uid": str(uuid.uuid4()), "creationTimestamp": _now(),
                "labels": {"kubernetes.io/metadata.name": namespace},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }  # fmt: skip
        self._bump(obj)
        self._objects.setdefault(NAMESPACES.key, {})[("", namespace)] = obj
        self._record(NAMESPACES, "ADDED", obj, None)

    def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: wire.Obj,
        *,
        subresource: str = "",
        mutate: Callable[[wire.Obj], wire.Obj] | None = None,
    ) -> wire.Obj:
        """PUT (``body``) or, with ``mutate``, a read-modify-write of the current object (PATCH).
        A stale ``metadata.resourceVersion`` in the result is a 409 Conflict."""
        with self.cond:
            table = self._objects.get(kind.key, {})
            current = table.get((namespace, name))
            if current is None:
                raise status.StatusError(status.not_found(kind.group, kind.plural, name))
            incoming = mutate(_copy(current)) if mutate is not None else _copy(body)
            meta = incoming.get("metadata")
            if not isinstance(meta, dict):
                raise status.StatusError(status.bad_request("metadata must be an object"))
            if meta.get("name", name) != name:
                raise status.StatusError(status.bad_request(
                    f"the name of the object ({str(meta.get('name'))[:64]}) does not match the "
                    f"name on the URL ({name})"
                ))  # fmt: skip
            sent_version = meta.get("resourceVersion")
            if sent_version and sent_version != current["metadata"]["resourceVersion"]:
                raise status.StatusError(
                    status.conflict(kind.group, kind.plural, name, status.MODIFIED)
                )
            merged = _ordered(_nil_lists(kind, self._merge(kind, current, incoming, subresource)))
            if merged == current:
                return _copy(current)
            if kind is PODS and merged.get("spec") != current.get("spec"):
                merged["metadata"]["generation"] = int(current["metadata"].get("generation", 1)) + 1
            self._bump(merged)
            previous = _copy(current)
            meta_new = merged["metadata"]
            if meta_new.get("deletionTimestamp") and not meta_new.get("finalizers"):
                del table[(namespace, name)]
                self._record(kind, "DELETED", merged, previous)
            else:
                table[(namespace, name)] = merged
                self._record(kind, "MODIFIED", merged, previous)
            return _copy(merged)

    def _merge(self, kind: Kind, current: wire.Obj, incoming: wire.Obj,
               subresource: str) -> wire.Obj:
        if subresource == "status":
            merged = _copy(current)
            if "status" in incoming:
                merged["status"] = incoming["status"]
            else:
                merged.pop("status", None)
            return merged
        merged = _copy(incoming)
        merged["apiVersion"], merged["kind"] = kind.api_version, kind.kind
        meta = merged["metadata"]
        old = current["metadata"]
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation", "resourceVersion"):  # fmt: skip
            if fixed in old:
                meta[fixed] = old[fixed]
            else:
                meta.pop(fixed, None)
        if kind.has_status:
            if "status" in current:
                merged["status"] = current["status"]
            else:
                merged.pop("status", None)
        return merged

    def delete(
        self, kind: Kind, namespace: str, name: str, preconditions: dict[str, Any] | None = None
    ) -> tuple[wire.Obj, bool]:
        """(the object, gone): gone False when finalizers keep it (deletionTimestamp set)."""
        with self.cond:
            table = self._objects.get(kind.key, {})
            current = table.get((namespace, name))
            if current is None:
                raise status.StatusError(status.not_found(kind.group, kind.plural, name))
            meta = current["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise status.StatusError(status.conflict(
                    kind.group, kind.plural, name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {meta.get('uid')}",
                ))  # fmt: skip
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise status.StatusError(status.conflict(
                    kind.group, kind.plural, name,
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{meta['resourceVersion']}",
                ))  # fmt: skip
            previous = _copy(current)
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = _now()
                    meta["deletionGracePeriodSeconds"] = 0
                    self._bump(current)
                    self._record(kind, "MODIFIED", current, previous)
                return _copy(current), False
            del table[(namespace, name)]
            self._bump(current)
            self._record(kind, "DELETED", current, previous)
            if kind is NAMESPACES:
                self._drop_namespace(name)
            return _copy(current), True

    def _drop_namespace(self, namespace: str) -> None:
        for key, table in self._objects.items():
            for item_key in [k for k in table if k[0] == namespace and key != NAMESPACES.key]:
                obj = table.pop(item_key)
                previous = _copy(obj)
                self._bump(obj)
                self._events.append(Event(self._revision, key, "DELETED", _copy(obj), previous))
                self._revisions.append(self._revision)
        self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def continue_token(revision: int, after: tuple[str, str]) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": list(after)})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def parse_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = orjson.loads(raw)
        return int(body["rv"]), (str(body["start"][0]), str(body["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise status.StatusError(
            status.bad_request("continue key is not valid: incorrect encoded start resourceVersion")
        ) from None
