"""What a pass's outcome does to an artifact's status: the rules docs/controllers.md gives
("Resolution of a hub source"), as pure functions of (status, outcome, time).

Two conditions: ``Resolved`` is the verdict mounts are authorized by; ``Degraded`` says how the
last pass went (``Healthy``, or the failing reason, its ``lastTransitionTime`` being when that
failure was first seen).

- A first resolution gives its verdict at once, except that an outage is never a verdict: it is
  retried every minute, and for an anchored artifact (``expectedDigest``) two outages a minute
  apart make the anchor the resolution (``digestSource: Expected``; the hub is never asked again)
  when its namespace has a proof (``controllers.resolver.anchoring``), and ``AnchorNotGranted``
  otherwise (the hub asked again every minute).
- A resolved artifact's revalidation: a refusal sets ``Degraded`` and is checked again a minute
  later, and the same refusal then sets ``Resolved=False``; an outage only degrades; a missing
  Secret sets ``Resolved=False`` at once; a later success restores ``Resolved=True`` with the
  commit and digest unchanged.

Each function edits ``status`` in place and returns the seconds until the next pass (None: no
pass is scheduled).
"""

from __future__ import annotations

import dataclasses
import datetime

from controllers.resolver import anchoring, passes
from controllers.runtime import conditions
from openapi import anchors, reasons, wire
from openapi.kinds import modelartifact
from timing import backoff as backoffs
from timing import clock as clocks

RESOLVED = reasons.RESOLVED
DEGRADED = reasons.DEGRADED
RECHECK = 60.0
"""A failure is checked again this long after it was first seen (docs/controllers.md)."""
MAX_BACKOFF = 3600.0
REFUSALS = backoffs.Backoff(RECHECK, MAX_BACKOFF)
"""Retries of a refusal: a minute, doubling per refusal in a row, at most an hour."""


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    now: datetime.datetime
    generation: int
    interval: float
    """The revalidation interval (``--revalidate-interval``)."""
    failures: int = 0
    """Failed passes of this artifact in a row before this one."""

    def backoff(self) -> float:
        """Retries of a refusal: a minute, doubling, at most an hour (or the interval)."""
        return min(self.interval, REFUSALS.delay(self.failures + 1))


def _put(status: wire.Obj, kind: str, state: str, reason: str, message: str, ctx: Context) -> None:
    conditions.put(status, kind, state, reason, message, now=ctx.now, generation=ctx.generation)
    status["observedGeneration"] = ctx.generation


def _healthy(status: wire.Obj, ctx: Context, message: str) -> None:
    _put(status, DEGRADED, "False", reasons.HEALTHY, message, ctx)


def _elapsed_since_failure(status: wire.Obj, ctx: Context) -> float:
    first = conditions.since(status, DEGRADED) or ctx.now
    return (ctx.now - first).total_seconds()


def starting(status: wire.Obj, ctx: Context, message: str) -> None:
    """Before the first pass: ``Resolved=Unknown``, ``Resolving``."""
    if conditions.find(status, RESOLVED) is None:
        _put(status, RESOLVED, "Unknown", reasons.RESOLVING, message, ctx)


def retry_at(status: wire.Obj, delay: float | None, now: datetime.datetime) -> None:
    """``status.retryTime``: when the next pass runs while ``Resolved`` is not True (a client
    reports it with a terminal reason, ``reasons.TERMINAL_RESOLVED_REASONS``); absent
    otherwise."""
    resolved_now = wire.is_true(status, RESOLVED)
    if resolved_now or delay is None or conditions.find(status, RESOLVED) is None:
        modelartifact.drop_retry_time(status)
        return
    status["retryTime"] = clocks.rfc3339(now + datetime.timedelta(seconds=delay))


# Hub sources: the first resolution ---------------------------------------------------------

def resolved(status: wire.Obj, found: passes.Resolution, ctx: Context, where: str) -> float:
    stamp = clocks.rfc3339(ctx.now)
    status["resolved"] = modelartifact.Resolved(
        revision=found.commit, manifestDigest=found.digest, digestSource=anchors.DIGEST_FROM_HUB,
        fileCount=found.file_count, sizeBytes=found.size_bytes, resolvedTime=stamp,
        lastValidatedTime=stamp)
    _put(status, RESOLVED, "True", reasons.RESOLVED,
         f"{where} resolved to commit {found.commit}: {found.file_count} files, "
         f"{found.size_bytes} bytes, {found.digest}", ctx)
    _healthy(status, ctx, "the last check succeeded")
    return ctx.interval


def not_resolved(status: wire.Obj, failure: passes.Failure, ctx: Context, anchor: str, *,
                 proof: anchoring.Proof | None = None, refusal: str = "") -> float | None:
    """A first resolution that failed; an anchored artifact may fall back to its anchor when
    ``proof`` says its namespace may have that content (``refusal`` says why not)."""
    if not failure.outage:
        _put(status, RESOLVED, "False", failure.reason, failure.message, ctx)
        _put(status, DEGRADED, "True", failure.reason, failure.message, ctx)
        return ctx.backoff()
    before = conditions.find(status, DEGRADED) or {}
    was_outage = (before.get("status") == "True"
                  and before.get("reason") == reasons.SOURCE_UNAVAILABLE)
    _put(status, DEGRADED, "True", reasons.SOURCE_UNAVAILABLE, failure.message, ctx)
    elapsed = _elapsed_since_failure(status, ctx) if was_outage else 0.0
    retry_after = failure.retry_after or 0.0
    if anchor and failure.from_hub and was_outage and elapsed >= RECHECK:
        if proof is not None:
            _anchored(status, anchor, proof, ctx)
            return None
        _put(status, RESOLVED, "False", reasons.ANCHOR_NOT_GRANTED,
             f"the hub stayed unreachable for two passes a minute apart, and {refusal}; "
             "asking the hub again in a minute", ctx)
        return max(RECHECK, retry_after)
    retry = RECHECK
    message = f"{failure.message}; trying again in a minute"
    if anchor and failure.from_hub:
        retry = max(1.0, RECHECK - elapsed)
        message += (", and if the hub is still unreachable then, spec.expectedDigest becomes "
                    f"the resolution ({proof.message})" if proof is not None else
                    f", and {refusal}")
    _put(status, RESOLVED, "False", reasons.SOURCE_UNAVAILABLE, message, ctx)
    return max(retry, retry_after)


def _anchored(status: wire.Obj, anchor: str, proof: anchoring.Proof, ctx: Context) -> None:
    status["resolved"] = modelartifact.Resolved(
        manifestDigest=anchor, digestSource=anchors.DIGEST_FROM_ANCHOR, anchorProof=proof.kind,
        resolvedTime=clocks.rfc3339(ctx.now))
    _anchor_stands(status, proof, ctx)
    _healthy(status, ctx, "resolved from the anchor; nothing more is checked")


def _anchor_stands(status: wire.Obj, proof: anchoring.Proof, ctx: Context) -> None:
    _put(status, RESOLVED, "True", reasons.RESOLVED,
         "the hub stayed unreachable for two passes a minute apart, so spec.expectedDigest is "
         f"the resolution (digestSource Expected, anchorProof {proof.kind}: {proof.message}); "
         "the hub is not contacted for this artifact again, and its content comes from nodes "
         "that hold that digest", ctx)


def anchor_proven(status: wire.Obj, proof: anchoring.Proof, ctx: Context) -> None:
    """An artifact resolved to its anchor, judged again: it stands on ``proof``."""
    status["resolved"] = {**modelartifact.resolved(modelartifact.of_status(status)),
                          "anchorProof": proof.kind}
    _anchor_stands(status, proof, ctx)


def anchor_withdrawn(status: wire.Obj, ctx: Context, refusal: str) -> None:
    """An artifact resolved to its anchor, judged again: no proof stands any more (or none was
    ever recorded). The resolution is dropped and the hub is asked again."""
    digest = modelartifact.manifest_digest(modelartifact.of_status(status))
    modelartifact.drop_resolution(status)
    _put(status, RESOLVED, "False", reasons.ANCHOR_NOT_GRANTED,
         f"the resolution to the anchor {digest} is withdrawn: {refusal}; no new mount is "
         "authorized (running Pods keep theirs), and the hub is asked again", ctx)


# Hub sources: revalidation of a resolved artifact ------------------------------------------

def confirmed(status: wire.Obj, ctx: Context, where: str) -> float:
    resolution = modelartifact.of_status(status)
    digest = modelartifact.manifest_digest(resolution)
    commit = modelartifact.revision(resolution)
    status["resolved"] = {**modelartifact.resolved(resolution),
                          "lastValidatedTime": clocks.rfc3339(ctx.now)}
    _put(status, RESOLVED, "True", reasons.RESOLVED,
         f"{where} resolved to commit {commit}, {digest}; access confirmed", ctx)
    _healthy(status, ctx, "the last check succeeded")
    return ctx.interval


def refused(status: wire.Obj, failure: passes.Failure, ctx: Context) -> float:
    """A revalidation that failed: the staircase."""
    if failure.reason == reasons.SECRET_NOT_FOUND:
        _put(status, DEGRADED, "True", failure.reason, failure.message, ctx)
        _put(status, RESOLVED, "False", failure.reason, failure.message, ctx)
        return ctx.backoff()
    if failure.outage:
        # A hub outage (or an unreadable Secret) never revokes pinned weights.
        _put(status, DEGRADED, "True", reasons.SOURCE_UNAVAILABLE,
             f"{failure.message}; the resolution stands, checking again in a minute", ctx)
        return max(RECHECK, failure.retry_after or 0.0)
    before = conditions.find(status, DEGRADED) or {}
    same = before.get("status") == "True" and before.get("reason") == failure.reason
    _put(status, DEGRADED, "True", failure.reason, failure.message, ctx)
    elapsed = _elapsed_since_failure(status, ctx) if same else 0.0
    current = conditions.find(status, RESOLVED) or {}
    if current.get("status") == "False" and current.get("reason") == failure.reason:
        return ctx.backoff()
    if same and elapsed >= RECHECK:
        _put(status, RESOLVED, "False", failure.reason,
             f"{failure.message}; refused twice a minute apart, so no new mount is authorized "
             "(the commit and digest stay, and a successful check restores Resolved)", ctx)
        return ctx.backoff()
    return max(1.0, RECHECK - elapsed)


# Claims and images ---------------------------------------------------------------------------

def offline(status: wire.Obj, ctx: Context, message: str) -> None:
    """A source that resolves without contacting anything: ``resolved`` holds only the time."""
    previous = modelartifact.resolved_time(modelartifact.of_status(status))
    status["resolved"] = modelartifact.Resolved(resolvedTime=previous or clocks.rfc3339(ctx.now))
    _put(status, RESOLVED, "True", reasons.RESOLVED, message, ctx)
    _healthy(status, ctx, "nothing to check")


def claim_missing(status: wire.Obj, ctx: Context, message: str) -> None:
    _put(status, RESOLVED, "False", reasons.CLAIM_NOT_FOUND, message, ctx)
    _put(status, DEGRADED, "True", reasons.CLAIM_NOT_FOUND, message, ctx)


def unsupported(status: wire.Obj, ctx: Context, message: str) -> None:
    _put(status, RESOLVED, "False", reasons.UNSUPPORTED_SOURCE, message, ctx)
    _put(status, DEGRADED, "True", reasons.UNSUPPORTED_SOURCE, message, ctx)
