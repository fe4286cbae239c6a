"""What a ModelPrefetch asks for, computed from what the informers hold: pure functions.

- ``targets``: the nodes a prefetch selects: those running the plugin (a NodeModelStore) merged
  from a store its binding names, whose labels ``placement.nodeSelector`` selects (a prefetch
  stored before the pool layer, without a binding, is not held to stores);
- ``node_entry``: one target node's phase from its NodeModelStore's ``status.models`` entry for
  the artifact's digest (and its warm-up's ``Hold``, when one failed or cannot be placed);
- ``status``: the counts and the conditions (``Lapsed`` among them), naming no node;
- ``pins``: the digests a node must keep, the union over every prefetch pinning there, shared
  fairly between namespaces when it would pass 256; a pin with ``ttlAfterLastUse`` lapses once
  the node's copy went unused that long (``lastUsedTime``, or the prefetch's creation while the
  node never used it).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping

from controllers.runtime import conditions
from openapi import reasons, sources, states, wire
from openapi import schema as schemas
from openapi.kinds import modelartifact, modelprefetch, nodemodelstore
from timing import clock as clocks
from timing import durations

Labels = Callable[[str], Mapping[str, str]]
"""A node's labels (empty when there are no Node objects: standalone)."""


artifact_name = modelprefetch.artifact_name
pinned = modelprefetch.pinned


def namespace(obj: wire.Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def ttl_seconds(prefetch: wire.Obj) -> float | None:
    text = modelprefetch.ttl_after_last_use(prefetch)
    if not text:
        return None
    try:
        return durations.parse(text, positive=True, bare_seconds=False)
    except ValueError:
        return None  # admission refuses it; a stored one that no longer parses pins forever


def targets(prefetch: wire.Obj, nodes: Iterable[tuple[str, str]], labels: Labels,
            allowed: set[str] | None) -> list[str]:
    """The target nodes, sorted: of ``nodes`` (node, the ModelStore its spec is merged from),
    those whose store is ``allowed`` (the binding's stores; None: not held to stores) and whose
    labels the placement selects (no selector: every one)."""
    selector = modelprefetch.node_selector(prefetch)
    return sorted(node for node, store in nodes
                  if (allowed is None or store in allowed)
                  and modelprefetch.selects(selector, labels(node)))


@dataclasses.dataclass(frozen=True, slots=True)
class Artifact:
    """What the prefetch needs of its artifact: its digest, or why there is none."""

    digest: str
    uid: str = ""
    secret: str = ""
    problem: str = ""
    """A reason (ArtifactNotFound, UnsupportedSource, ArtifactNotResolved), empty when usable."""
    message: str = ""


def artifact_of(prefetch: wire.Obj, found: wire.Obj | None) -> Artifact:
    name = f"{namespace(prefetch)}/{artifact_name(prefetch)}"
    if found is None:
        return Artifact("", problem=reasons.ARTIFACT_NOT_FOUND,
                        message=f"ModelArtifact {name} does not exist (yet)")
    kind = modelartifact.source_kind(found)
    if kind in sources.WHOLE_KINDS:
        return Artifact("", problem=reasons.UNSUPPORTED_SOURCE,
                        message=f"ModelArtifact {name} has a {kind} source; only "
                                "huggingFace and modelScope artifacts can be prefetched")
    digest = modelartifact.manifest_digest(found)
    if not digest:
        return Artifact("", problem=reasons.ARTIFACT_NOT_RESOLVED,
                        message=f"ModelArtifact {name} is not resolved to a digest yet")
    return Artifact(digest, uid=str((found.get("metadata") or {}).get("uid") or ""),
                    secret=modelartifact.secret_name(found))


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """Why a node's warm-up failed or is not made (a delivery's answer): the entry's phase
    (``Failed``, or ``Pending`` while it waits), reason and message."""

    reason: str
    message: str
    phase: str = states.FAILED


def failed(message: str) -> Hold:
    """A warm-up that was made and failed (``DeliveryFailed``)."""
    return Hold(reasons.DELIVERY_FAILED, message)


def model_entry(store: wire.Obj | None, digest: str) -> wire.Readable | None:
    if store is None or not digest:
        return None
    return nodemodelstore.entry(store, digest)


def _count(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


def node_entry(node: str, store: wire.Obj | None, artifact: Artifact,
               held: Hold | None = None) -> wire.Obj:
    """One target node's ``status.nodes[]`` entry (``pinned`` is added by the caller)."""
    entry: wire.Obj = {"name": node}
    if store is None:
        return {**entry, "phase": states.PENDING, "reason": reasons.NO_NODE_STORE,
                "message": "no NodeModelStore: the node plugin does not run on this node"}
    if artifact.problem:
        return {**entry, "phase": states.PENDING, "reason": artifact.problem,
                "message": artifact.message}
    found = model_entry(store, artifact.digest)
    state = nodemodelstore.entry_state(found) if found is not None else ""
    if found is not None:
        size = _count(nodemodelstore.entry_size(found))
        if size is not None:
            entry["sizeBytes"] = size
        downloaded = _count(nodemodelstore.entry_downloaded(found))
        if downloaded is not None:
            entry["downloadedBytes"] = downloaded
    if state == states.READY:
        return {**entry, "phase": states.READY}
    if state == states.DOWNLOADING:
        return {**entry, "phase": states.DOWNLOADING}
    if state == states.FAILED and found is not None:
        return {**entry, "phase": states.FAILED, "reason": nodemodelstore.entry_reason(found),
                "message": nodemodelstore.entry_message(found)[:1024]}
    if held is not None:
        return {**entry, "phase": held.phase, "reason": held.reason,
                "message": held.message[:1024]}
    return {**entry, "phase": states.PENDING}


def status(prefetch: wire.Obj, nodes: list[wire.Obj], artifact: Artifact, *,
           now: datetime.datetime, base: wire.Obj, lapsed: int = 0,
           problem: tuple[str, str] | None = None) -> wire.Obj:
    """The prefetch's new status from its entries (counted, never listed); ``base`` is the
    current status (its conditions' transition times are kept); ``lapsed``: the entries not
    Ready whose pin lapsed past ``ttlAfterLastUse`` (not warmed again); ``problem``: a reason
    and message that stops the prefetch before its artifact is looked at (its binding)."""
    generation = int((prefetch.get("metadata") or {}).get("generation") or 0)
    ready = sum(1 for n in nodes if n["phase"] == states.READY)
    downloading = sum(1 for n in nodes if n["phase"] == states.DOWNLOADING)
    failed = sum(1 for n in nodes if n["phase"] == states.FAILED)
    desired = len(nodes)
    result: wire.Obj = {"conditions": list(base.get("conditions") or [])}
    result.update({"observedGeneration": generation, "desiredNodes": desired,
                   "readyNodes": ready, "downloadingNodes": downloading, "failedNodes": failed})
    if artifact.digest:
        result.update(modelprefetch.Status(manifestDigest=artifact.digest))
    minimum = modelprefetch.min_ready(prefetch)
    need = minimum or desired

    def put(kind: str, state: bool, reason: str, message: str) -> None:
        conditions.put(result, kind, "True" if state else "False", reason, message, now=now,
                       generation=generation)

    if problem is None and artifact.problem:
        problem = (artifact.problem, artifact.message)
    if problem is not None:
        reason, message = problem
        put(reasons.AVAILABLE, False, reason, message)
        put(reasons.PROGRESSING, False, reason, message)
        put(reasons.DEGRADED, True, reason, message)
        put(reasons.LAPSED, False, reason, "no shortfall is the retention's doing")
        return result
    if desired == 0:
        message = "the targets select no node (yet); nothing is warmed"
        put(reasons.AVAILABLE, False, reasons.NO_TARGETS, message)
        put(reasons.PROGRESSING, False, reasons.NO_TARGETS, message)
        put(reasons.DEGRADED, True, reasons.NO_TARGETS, message)
        put(reasons.LAPSED, False, reasons.NO_TARGETS, "no shortfall is the retention's doing")
        return result
    if ready >= need:
        put(reasons.AVAILABLE, True, reasons.ENOUGH_READY,
            f"{ready} of {desired} target nodes hold the content (at least {need} needed)")
    else:
        put(reasons.AVAILABLE, False, reasons.TOO_FEW_READY,
            f"{ready} of {desired} target nodes hold the content; {need} needed")
    waiting = desired - ready - failed - lapsed
    if waiting:
        put(reasons.PROGRESSING, True, reasons.WARMING,
            f"{downloading} downloading, {waiting - downloading} pending")
    else:
        put(reasons.PROGRESSING, False, reasons.COMPLETE,
            "every target node is Ready, Failed or lapsed")
    if failed:
        why: dict[str, int] = {}
        for n in nodes:
            if n["phase"] == states.FAILED:
                reason = str(n.get("reason") or "unknown")
                why[reason] = why.get(reason, 0) + 1
        put(reasons.DEGRADED, True, reasons.NODES_FAILED,
            f"{failed} target node(s) failed: "
            + ", ".join(f"{reason} ({count})" for reason, count in sorted(why.items()))[:1024])
    else:
        put(reasons.DEGRADED, False, reasons.HEALTHY, "no target node failed")
    others = desired - ready - lapsed
    if ready < need and lapsed and others == 0:
        put(reasons.LAPSED, True, reasons.RETENTION_EXPIRED,
            f"{lapsed} copy(ies) went unused past ttlAfterLastUse, were unpinned and are not "
            f"warmed again: {ready} of {need} needed are Ready")
    else:
        put(reasons.LAPSED, False, reasons.NOT_LAPSED,
            "no shortfall below minReady is the retention's doing")
    return result


def pin_until(prefetch: wire.Obj, store: wire.Obj | None, digest: str) -> datetime.datetime | None:
    """When the prefetch's pin of ``digest`` on the node of ``store`` lapses; None: never."""
    ttl = ttl_seconds(prefetch)
    if ttl is None:
        return None
    entry = model_entry(store, digest)
    used = clocks.parse(nodemodelstore.entry_last_used(entry) if entry else None) or clocks.parse(
        (prefetch.get("metadata") or {}).get("creationTimestamp"))
    if used is None:
        return None
    return used + datetime.timedelta(seconds=ttl)


@dataclasses.dataclass(frozen=True, slots=True)
class Pin:
    digest: str
    since: str
    """The pinning prefetch's creationTimestamp: within a namespace, the oldest pins are kept
    when a node's list would pass 256."""
    until: datetime.datetime | None
    namespace: str = ""


def pins(node_pins: Iterable[Pin], now: datetime.datetime) -> tuple[list[str], float | None]:
    """The node's ``spec.pinned`` (sorted; at most 256) and the seconds until the next pin
    lapses (None: none will). Past 256 the list is shared fairly: the namespaces take turns, each
    its oldest pin first, so no namespace's pins push another's out while it holds no more than
    its share; a digest two namespaces pin is kept once, in the earlier turn."""
    first: dict[tuple[str, str], str] = {}
    wake: float | None = None
    for pin in node_pins:
        if pin.until is not None:
            left = (pin.until - now).total_seconds()
            if left <= 0:
                continue
            wake = left if wake is None else min(wake, left)
        key = (pin.namespace, pin.digest)
        if key not in first or pin.since < first[key]:
            first[key] = pin.since
    queues: dict[str, list[str]] = {}
    for (namespace, digest), _since in sorted(first.items(), key=lambda e: (e[1], e[0][1])):
        queues.setdefault(namespace, []).append(digest)
    kept: list[str] = []
    chosen: set[str] = set()
    turn = 0
    while len(chosen) < schemas.MAX_PINNED and any(turn < len(q) for q in queues.values()):
        for namespace in sorted(queues):
            queue = queues[namespace]
            if turn < len(queue) and queue[turn] not in chosen:
                if len(chosen) == schemas.MAX_PINNED:
                    break
                chosen.add(queue[turn])
                kept.append(queue[turn])
        turn += 1
    return sorted(kept), wake
