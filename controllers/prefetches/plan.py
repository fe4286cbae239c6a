"""What a ModelPrefetch asks for, computed from what the informers hold: pure functions.

- ``targets``: the nodes a prefetch selects (``nodeNames`` plus the nodes running the plugin whose
  labels match ``nodeSelector``);
- ``node_entry``: one target node's phase from its NodeModelStore's ``status.models`` entry for
  the artifact's digest (and its warm-up's ``Hold``, when one failed or cannot be placed);
- ``status``: the counts, the entries (at most 256, by name) and the conditions;
- ``pins``: the digests a node must keep, the union over every prefetch pinning there; a pin with
  ``ttlAfterLastUse`` lapses once the node's copy went unused that long (``lastUsedTime``, or the
  prefetch's creation while the node never used it).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controllers.runtime import conditions
from openapi import reasons, sources
from openapi import schema as schemas
from timing import clock as clocks
from timing import durations

Obj = dict[str, Any]
Labels = Callable[[str], Mapping[str, str]]
"""A node's labels (empty when there are no Node objects: standalone)."""


def spec(prefetch: Obj) -> Obj:
    found = prefetch.get("spec")
    return found if isinstance(found, dict) else {}


def _member(obj: Obj, name: str) -> Obj:
    found = obj.get(name)
    return found if isinstance(found, dict) else {}


def artifact_name(prefetch: Obj) -> str:
    return str(_member(spec(prefetch), "artifactRef").get("name") or "")


def namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def pinned(prefetch: Obj) -> bool:
    return _member(spec(prefetch), "retention").get("pinned", True) is not False


def ttl_seconds(prefetch: Obj) -> float | None:
    text = _member(spec(prefetch), "retention").get("ttlAfterLastUse")
    if not isinstance(text, str) or not text:
        return None
    try:
        return durations.parse(text, positive=True, bare_seconds=False)
    except ValueError:
        return None  # admission refuses it; a stored one that no longer parses pins forever


def targets(prefetch: Obj, stores: Iterable[str], labels: Labels) -> list[str]:
    """The target nodes, sorted: named ones (with or without a NodeModelStore) plus the nodes
    with a NodeModelStore whose labels hold every selector pair."""
    wanted = _member(spec(prefetch), "targets")
    found = {str(n) for n in wanted.get("nodeNames") or [] if isinstance(n, str) and n}
    selector = wanted.get("nodeSelector")
    if isinstance(selector, dict):
        for node in stores:
            held = labels(node)
            if all(held.get(key) == value for key, value in selector.items()):
                found.add(node)
    return sorted(found)


@dataclasses.dataclass(frozen=True, slots=True)
class Artifact:
    """What the prefetch needs of its artifact: its digest, or why there is none."""

    digest: str
    uid: str = ""
    secret: str = ""
    problem: str = ""
    """A reason (ArtifactNotFound, UnsupportedSource, ArtifactNotResolved), empty when usable."""
    message: str = ""


def artifact_of(prefetch: Obj, found: Obj | None) -> Artifact:
    name = f"{namespace(prefetch)}/{artifact_name(prefetch)}"
    if found is None:
        return Artifact("", problem=reasons.ARTIFACT_NOT_FOUND,
                        message=f"ModelArtifact {name} does not exist (yet)")
    source = _member(spec(found), "source")
    for kind in (sources.CLAIM, sources.IMAGE):
        if kind in source:
            return Artifact("", problem=reasons.UNSUPPORTED_SOURCE,
                            message=f"ModelArtifact {name} has a {kind} source; only "
                                    "huggingFace and modelScope artifacts can be prefetched")
    resolved = _member(_member(found, "status"), "resolved")
    digest = resolved.get("manifestDigest")
    if not isinstance(digest, str) or not digest:
        return Artifact("", problem=reasons.ARTIFACT_NOT_RESOLVED,
                        message=f"ModelArtifact {name} is not resolved to a digest yet")
    secret = ""
    for kind in sources.HUB_KINDS:
        secret = str(_member(_member(source, kind), "secretRef").get("name") or "") or secret
    return Artifact(digest, uid=str((found.get("metadata") or {}).get("uid") or ""),
                    secret=secret)


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """Why a node's warm-up failed or is not made (a delivery's answer): the entry's phase
    (``Failed``, or ``Pending`` while it waits), reason and message."""

    reason: str
    message: str
    phase: str = "Failed"


def failed(message: str) -> Hold:
    """A warm-up that was made and failed (``DeliveryFailed``)."""
    return Hold(reasons.DELIVERY_FAILED, message)


def model_entry(store: Obj | None, digest: str) -> Obj | None:
    if store is None or not digest:
        return None
    for entry in _member(store, "status").get("models") or []:
        if isinstance(entry, dict) and entry.get("digest") == digest:
            return entry
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def node_entry(node: str, store: Obj | None, artifact: Artifact,
               held: Hold | None = None) -> Obj:
    """One target node's ``status.nodes[]`` entry (``pinned`` is added by the caller)."""
    entry: Obj = {"name": node}
    if store is None:
        return {**entry, "phase": "Pending", "reason": reasons.NO_NODE_STORE,
                "message": "no NodeModelStore: the node plugin does not run on this node"}
    if artifact.problem:
        return {**entry, "phase": "Pending", "reason": artifact.problem,
                "message": artifact.message}
    found = model_entry(store, artifact.digest)
    state = str((found or {}).get("state") or "")
    if found is not None:
        for field in ("sizeBytes", "downloadedBytes"):
            counted = _count(found.get(field))
            if counted is not None:
                entry[field] = counted
    if state == "Ready":
        return {**entry, "phase": "Ready"}
    if state == "Downloading":
        return {**entry, "phase": "Downloading"}
    if state == "Failed":
        return {**entry, "phase": "Failed", "reason": str(found.get("reason") or "") if found
                else "", "message": str((found or {}).get("message") or "")[:1024]}
    if held is not None:
        return {**entry, "phase": held.phase, "reason": held.reason,
                "message": held.message[:1024]}
    return {**entry, "phase": "Pending"}


def status(prefetch: Obj, nodes: list[Obj], artifact: Artifact, *,
           now: datetime.datetime, base: Obj) -> Obj:
    """The prefetch's new status from its entries; ``base`` is the current status (its
    conditions' transition times are kept)."""
    generation = int((prefetch.get("metadata") or {}).get("generation") or 0)
    ready = sum(1 for n in nodes if n["phase"] == "Ready")
    downloading = sum(1 for n in nodes if n["phase"] == "Downloading")
    failed = sum(1 for n in nodes if n["phase"] == "Failed")
    desired = len(nodes)
    result: Obj = {"conditions": list(base.get("conditions") or [])}
    result.update({"observedGeneration": generation, "desiredNodes": desired,
                   "readyNodes": ready, "downloadingNodes": downloading, "failedNodes": failed,
                   "nodes": nodes[:schemas.MAX_PREFETCH_NODES]})
    if artifact.digest:
        result["manifestDigest"] = artifact.digest
    minimum = int(_member(spec(prefetch), "targets").get("minReady") or 0)
    need = minimum or desired

    def put(kind: str, state: bool, reason: str, message: str) -> None:
        conditions.put(result, kind, "True" if state else "False", reason, message, now=now,
                       generation=generation)

    if artifact.problem:
        put(reasons.AVAILABLE, False, artifact.problem, artifact.message)
        put(reasons.PROGRESSING, False, artifact.problem, artifact.message)
        put(reasons.DEGRADED, True, artifact.problem, artifact.message)
        return result
    if desired == 0:
        message = "the targets select no node (yet); nothing is warmed"
        put(reasons.AVAILABLE, False, reasons.NO_TARGETS, message)
        put(reasons.PROGRESSING, False, reasons.NO_TARGETS, message)
        put(reasons.DEGRADED, True, reasons.NO_TARGETS, message)
        return result
    if ready >= need:
        put(reasons.AVAILABLE, True, reasons.ENOUGH_READY,
            f"{ready} of {desired} target nodes hold the content (at least {need} needed)")
    else:
        put(reasons.AVAILABLE, False, reasons.TOO_FEW_READY,
            f"{ready} of {desired} target nodes hold the content; {need} needed")
    waiting = desired - ready - failed
    if waiting:
        put(reasons.PROGRESSING, True, reasons.WARMING,
            f"{downloading} downloading, {waiting - downloading} pending")
    else:
        put(reasons.PROGRESSING, False, reasons.COMPLETE,
            "every target node is Ready or Failed")
    if failed:
        put(reasons.DEGRADED, True, reasons.NODES_FAILED,
            f"{failed} target node(s) failed: "
            + ", ".join(f"{n['name']} ({n.get('reason') or 'unknown'})"
                        for n in nodes if n["phase"] == "Failed")[:1024])
    else:
        put(reasons.DEGRADED, False, reasons.HEALTHY, "no target node failed")
    return result


def pin_until(prefetch: Obj, store: Obj | None, digest: str) -> datetime.datetime | None:
    """When the prefetch's pin of ``digest`` on the node of ``store`` lapses; None: never."""
    ttl = ttl_seconds(prefetch)
    if ttl is None:
        return None
    entry = model_entry(store, digest)
    used = clocks.parse((entry or {}).get("lastUsedTime")) or clocks.parse(
        (prefetch.get("metadata") or {}).get("creationTimestamp"))
    if used is None:
        return None
    return used + datetime.timedelta(seconds=ttl)


@dataclasses.dataclass(frozen=True, slots=True)
class Pin:
    digest: str
    since: str
    """The pinning prefetch's creationTimestamp: the oldest pins are kept when a node's list
    would pass 256."""
    until: datetime.datetime | None


def pins(node_pins: Iterable[Pin], now: datetime.datetime) -> tuple[list[str], float | None]:
    """The node's ``spec.pinned`` (sorted; at most 256, oldest prefetch first) and the seconds
    until the next pin lapses (None: none will)."""
    first: dict[str, str] = {}
    wake: float | None = None
    for pin in node_pins:
        if pin.until is not None:
            left = (pin.until - now).total_seconds()
            if left <= 0:
                continue
            wake = left if wake is None else min(wake, left)
        if pin.digest not in first or pin.since < first[pin.digest]:
            first[pin.digest] = pin.since
    kept = sorted(first, key=lambda d: (first[d], d))[:schemas.MAX_PINNED]
    return sorted(kept), wake
