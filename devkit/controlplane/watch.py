"""Watch streams: JSON lines of ADDED/MODIFIED/DELETED with kube's selector transitions, BOOKMARK
events (on the interval and on demand), ``sendInitialEvents`` with the initial-events-end
bookmark, ``timeoutSeconds``, and a 410 ``ERROR`` event for a compacted resourceVersion."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from devkit.controlplane import objects, status
from devkit.controlplane.store import Event, Store
from openapi import wire

DEFAULT_TIMEOUT = 1800.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

Write = Callable[[bytes], None]


def _line(type_: str, obj: wire.Obj) -> bytes:
    return orjson.dumps({"type": type_, "object": obj}) + b"\n"


# What kube-apiserver 1.36 writes besides metadata in a BOOKMARK's object: the kind's empty
# object as Go serializes it, nil lists as null (kube-samples/watch-bookmarks.json). Kinds not
# recorded there get metadata only.
_EMPTY: dict[str, wire.Obj] = {
    "Pod": {"spec": {"containers": None}, "status": {}},
    "CSINode": {"spec": {"drivers": None}},
    "Lease": {"spec": {}},
    "PersistentVolumeClaim": {"spec": {"resources": {}}, "status": {}},
    "Node": {"spec": {}, "status": {
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
        "nodeInfo": {key: "" for key in (
            "machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
            "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion", "operatingSystem",
            "architecture",
        )},
    }},
}  # fmt: skip


def _bookmark(call: objects.Call, revision: int, initial_end: bool = False) -> wire.Obj:
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    body: wire.Obj = {"kind": call.kind.kind, "apiVersion": call.kind.api_version, "metadata": meta}
    body.update(orjson.loads(orjson.dumps(_EMPTY.get(call.kind.kind, {}))))
    return body


def _translate(event: Event, namespace: str, match: Callable[[wire.Obj], bool]) -> str | None:
    def visible(obj: wire.Obj | None) -> bool:
        if obj is None:
            return False
        if namespace and obj.get("metadata", {}).get("namespace") != namespace:
            return False
        return match(obj)

    now, before = visible(event.object), visible(event.previous)
    if event.type == "ADDED":
        return "ADDED" if now else None
    if event.type == "DELETED":
        return "DELETED" if before or now else None
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None


class Bookmarks:
    """On-demand bookmarks: ``request()`` makes every open watch that allows bookmarks send one."""

    def __init__(self) -> None:
        self.generation = 0
        self.interval: float | None = 60.0


def serve(
    store: Store,
    call: objects.Call,
    write: Write,
    bookmarks: Bookmarks,
    stopping: Callable[[], bool],
    bookmark_generation: int,
) -> None:
    query = call.query
    match = objects.matcher(call)
    namespace = call.info.namespace
    timeout_text = query.get("timeoutSeconds", "")
    timeout = float(timeout_text) if timeout_text.isdigit() else DEFAULT_TIMEOUT
    deadline = time.monotonic() + timeout
    allow_bookmarks = query.get("allowWatchBookmarks", "") in ("true", "1")
    initial = query.get("sendInitialEvents", "") == "true"
    version = query.get("resourceVersion", "")
    if version not in ("", "0") and not version.isdigit():
        raise status.StatusError(status.bad_request(f"invalid resource version: {version[:40]}"))
    if version in ("", "0") or initial:
        items, cursor = store.list(call.kind, namespace, match)
        for item in items:
            write(_line("ADDED", item))
        if initial and allow_bookmarks:
            write(_line("BOOKMARK", _bookmark(call, cursor, initial_end=True)))
    else:
        cursor = int(version)
    seen_generation = bookmark_generation
    last_bookmark = time.monotonic()
    while not stopping():
        with store.cond:
            try:
                events = store.events_after(call.kind, cursor)
            except status.StatusError as exc:
                write(_line("ERROR", exc.body))
                return
            head = store.revision
            if not events and not store.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                wait = remaining
                if allow_bookmarks and bookmarks.interval is not None:
                    due_in = last_bookmark + bookmarks.interval - time.monotonic()
                    wait = min(wait, max(0.0, due_in))
                if bookmarks.generation == seen_generation:
                    store.cond.wait(timeout=min(wait, 1.0))
                events = store.events_after(call.kind, cursor)
                head = store.revision
            if store.closed:
                return
        for event in events:
            type_ = _translate(event, namespace, match)
            if type_ is not None:
                write(_line(type_, event.object))
        cursor = head
        due = bookmarks.interval is not None and (
            time.monotonic() - last_bookmark >= bookmarks.interval
        )
        if allow_bookmarks and (due or bookmarks.generation != seen_generation):
            write(_line("BOOKMARK", _bookmark(call, cursor)))
            last_bookmark = time.monotonic()
        seen_generation = bookmarks.generation
        if time.monotonic() >= deadline:
            return
