"""Anchors need proof: may an artifact's ``expectedDigest`` stand for its content without the hub?

Digests are not secret (Pod volume attributes, node stores, a gated repository's public
listing), and mounts are authorized by namespace, artifact and digest; so an anchor that became
a resolution by the hub's absence alone would let any tenant mount any content a node holds. The
resolver lets the anchor stand only with one of two proofs (``openapi.anchors``), written in
``status.resolved.anchorProof``:

- ``Grant``: an administrator granted it (the annotation, and the server's record of the allowed
  grant in ``status.anchorGrant``, ``apiserver/admission/anchors.py``);
- ``HubVerified``: the same namespace has an artifact the hub resolved to that digest from its
  own listing (``Resolved=True``, ``digestSource: Hub``), or had one: the worker's record of that
  verification (``controllers/runtime/proofs.py``), made within the revalidation interval.

Keeping an anchor asks less than making one: a ``HubVerified`` anchor stands while the record
does, whatever its age (deleting the verified artifact does not undo what the hub showed), and
falls when the hub refuses that namespace the content (the record is dropped then) or, for a
``Grant``, when the grant is removed, unless the other proof holds. An anchor resolved before
proofs existed (no ``anchorProof``) is judged afresh.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging

from controllers.runtime import errors, informer, proofs
from openapi import anchors, wire
from openapi.kinds import modelartifact
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
HUB_VERIFIED_INDEX = "hub-verified"
ANCHORED_INDEX = "anchored"
GRANT_RECORD = "anchorGrant"


@dataclasses.dataclass(frozen=True, slots=True)
class Proof:
    kind: anchors.Proof
    """``anchors.GRANT`` or ``anchors.HUB_VERIFIED``."""
    message: str
    """What proved it, for the ``Resolved`` condition."""


def _meta(obj: wire.Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid"))


anchor_of = modelartifact.expected_digest


def verified_digest(obj: wire.Obj) -> str:
    """The digest the hub resolved this artifact to, while it stands (else empty)."""
    if (modelartifact.digest_source(obj) != anchors.DIGEST_FROM_HUB
            or not modelartifact.is_resolved(obj)):
        return ""
    return modelartifact.manifest_digest(obj)


def _hub_verified(obj: wire.Obj) -> list[str]:
    digest = verified_digest(obj)
    return [f"{_meta(obj)[0]}/{digest}"] if digest else []


def _anchored(obj: wire.Obj) -> list[str]:
    anchor = anchor_of(obj)
    return [f"{_meta(obj)[0]}/{anchor}"] if anchor else []


def granted(obj: wire.Obj) -> str:
    """When an administrator's grant was recorded, or empty when there is none."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if anchors.ANNOTATION not in annotations or not modelartifact.has_anchor_grant(obj):
        return ""
    return modelartifact.anchor_granted(obj)


class Anchoring:
    """The proofs of the artifacts of one informer, and the worker's record behind them."""

    def __init__(self, artifacts: informer.Informer, ledger: proofs.Ledger) -> None:
        self._artifacts = artifacts
        self._ledger = ledger
        self._recorded: dict[str, str] = {}
        """uid -> the verified time last written to the ledger for it ("" after a drop)."""
        artifacts.add_index(HUB_VERIFIED_INDEX, _hub_verified)
        artifacts.add_index(ANCHORED_INDEX, _anchored)

    def anchored_to(self, namespace: str, digest: str) -> list[Key]:
        """The artifacts of ``namespace`` whose anchor is ``digest``."""
        return self._artifacts.index_keys(ANCHORED_INDEX, f"{namespace}/{digest}")

    # the record ---------------------------------------------------------------------------

    async def observe(self, obj: wire.Obj) -> list[Key]:
        """Keep the record in step with a hub-sourced artifact's status: its verification
        written (once per ``lastValidatedTime``), or dropped when the hub refused it after
        all (``Resolved=False`` with a digest from the hub); returns the anchored artifacts to
        judge again after a drop. A record that cannot be written now is tried again with the
        artifact's next pass."""
        namespace, name, uid = _meta(obj)
        digest = modelartifact.manifest_digest(obj)
        if modelartifact.digest_source(obj) != anchors.DIGEST_FROM_HUB or not digest:
            return []
        found = modelartifact.resolved_condition(obj) or {}
        if found.get("status") == wire.TRUE:
            stamp = modelartifact.last_validated(obj) or modelartifact.resolved_time(obj)
            verified = clocks.parse(stamp)
            if verified is None or self._recorded.get(uid) == stamp:
                return []
            try:
                await self._ledger.write(proofs.Record(namespace, digest, name, uid, verified))
            except errors.ApiError as exc:
                log.warning("%s/%s: the hub's verification of %s is not recorded yet: %s",
                            namespace, name, digest, exc.message)
                return []
            self._recorded[uid] = stamp
            return []
        if found.get("status") != "False" or self._recorded.get(uid) == "":
            return []
        try:
            await self._ledger.delete(namespace, digest, uid)
        except errors.ApiError as exc:
            log.warning("%s/%s: the record of %s is not dropped yet: %s", namespace, name, digest,
                        exc.message)
            return []
        self._recorded[uid] = ""
        return self.anchored_to(namespace, digest)

    def forget(self, uid: str) -> None:
        self._recorded.pop(uid, None)

    # the judgement ------------------------------------------------------------------------

    async def proof(self, obj: wire.Obj, now: datetime.datetime, interval: float, *,
                    keeping: str = "") -> Proof | None:
        """The proof that ``obj``'s namespace may have its anchor, None when there is none.
        ``keeping``: the proof the artifact already stands on (then a record of any age
        counts). Raises ``errors.ApiError`` when the worker's record cannot be read."""
        namespace, name, _ = _meta(obj)
        anchor = anchor_of(obj)
        when = granted(obj)
        if when:
            return Proof(anchors.GRANT, f"an administrator granted the anchor at {when} "
                         f"({anchors.ANNOTATION})")
        for other in self._artifacts.by_index(HUB_VERIFIED_INDEX, f"{namespace}/{anchor}"):
            other_name = _meta(other)[1]
            if other_name != name:
                return Proof(anchors.HUB_VERIFIED, f"ModelArtifact {namespace}/{other_name} "
                             "resolved to it from the hub")
        record = await self._ledger.read(namespace, anchor)
        if record is None:
            return None
        age = (now - record.verified).total_seconds()
        if keeping != anchors.HUB_VERIFIED and age > interval:
            return None
        return Proof(anchors.HUB_VERIFIED, f"ModelArtifact {namespace}/{record.artifact} "
                     f"resolved to it from the hub, last confirmed at "
                     f"{clocks.rfc3339(record.verified)}")

    async def would_stand(self, obj: wire.Obj, now: datetime.datetime, interval: float
                          ) -> tuple[Proof | None, str]:
        """The proof a new anchor would stand on, or None and why not (the record unreadable
        included: no anchor is made on a proof that cannot be checked)."""
        try:
            found = await self.proof(obj, now, interval)
        except errors.ApiError as exc:
            return None, ("whether its namespace may have that content could not be told (the "
                          f"worker's record of the hub's verifications: {exc.message})")
        return (found, "") if found is not None else (None, self.refusal(obj, interval))

    def refusal(self, obj: wire.Obj, interval: float) -> str:
        """Why the anchor of ``obj`` may not stand (for ``AnchorNotGranted``)."""
        namespace = _meta(obj)[0]
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        grant = (f"its annotation {anchors.ANNOTATION} was not set by a user allowed verb "
                 f"{anchors.VERB} on {anchors.RESOURCE} (there is no status.{GRANT_RECORD}; "
                 "such a user grants it by setting a new value)"
                 if anchors.ANNOTATION in annotations else
                 f"no administrator granted it (the annotation {anchors.ANNOTATION}, set by a "
                 f"user allowed verb {anchors.VERB} on {anchors.RESOURCE})")
        return (f"spec.expectedDigest {anchor_of(obj)} may not stand for the content: namespace "
                f"{namespace} has no artifact the hub resolved to that digest (now, or within "
                f"the last {_span(interval)}), and {grant}")


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
