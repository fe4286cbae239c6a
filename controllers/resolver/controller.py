"""The resolver: gives every ModelArtifact its ``status.resolved`` and its ``Resolved`` and
``Degraded`` conditions, then keeps checking that the namespace's token still reads it.

Inputs: the artifact informer, the artifact's Secret (``secrets.Secrets``), the claims
(``claims.Claims``), the hubs (``passes.Passes``). Output: status writes as the worker. A pass
runs when an artifact is new, when its revalidation is due (``--revalidate-interval``), when a
retry comes due, and at once when its Secret changes; anything else that wakes it (its own status
write, a resync) finds nothing due and only reschedules. The rules of each outcome are in
``verdict``; whether an anchor may stand for the content without the hub is ``anchoring``'s
(judged when it would become the resolution, and again at every pass of an artifact resolved to
it), and each verification by the hub goes into the worker's record (``proofs``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from controllers.resolver import anchoring, hubs, passes, verdict
from controllers.runtime import client as clients
from controllers.runtime import conditions, errors, events, informer, proofs, status
from controllers.runtime import controller as runtime
from controllers.runtime import manifests as manifests_
from controllers.sources import claims, secrets
from hub import errors as hub_errors
from openapi import manifest, reasons, sources, wire
from openapi.kinds import modelartifact
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
SECRET_INDEX = "secret"
CLAIM_INDEX = "claim"
HUB_KINDS = sources.HUB_KINDS


def source_of(obj: wire.Obj) -> dict[str, Any]:
    return ((obj.get("spec") or {}).get("source") or {})


def secret_refs(obj: wire.Obj) -> list[str]:
    """``namespace/name`` of the Secret an artifact reads (for the Secret index)."""
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    name = modelartifact.secret_name(obj)
    return [f"{namespace}/{name}"] if name else []


def claim_refs(obj: wire.Obj) -> list[str]:
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    claim = modelartifact.claim_name(obj)
    return [f"{namespace}/{claim}"] if claim else []


class Resolver:
    name = "resolver"

    def __init__(
        self,
        api: clients.Client,
        artifacts: informer.Informer,
        hub_passes: passes.Passes,
        hub_set: hubs.Hubs,
        secret_source: secrets.Secrets,
        claim_source: claims.Claims,
        clock: clocks.Clock,
        *,
        interval: float = 86400.0,
        recorder: events.Recorder | None = None,
        concurrency: int = 8,
        ledger: proofs.Ledger | None = None,
        manifests: manifests_.Keeper | None = None,
    ) -> None:
        """``ledger``: where the hub's verifications are recorded (``proofs``; in memory when
        not given); ``manifests``: where each resolved manifest is kept (none when not
        given)."""
        self._api = api
        self._artifacts = artifacts
        self._passes = hub_passes
        self._hubs = hub_set
        self._secrets = secret_source
        self._claims = claim_source
        self._clock = clock
        self.interval = interval
        self._recorder = recorder or events.LogRecorder()
        self._due: dict[str, float] = {}
        self._forced: set[str] = set()
        self._failures: dict[str, int] = {}
        self._uids: dict[Key, str] = {}
        self._tokens_checked: dict[tuple[str, str], str] = {}
        self._written: dict[Key, wire.Obj] = {}
        self.passes_run = 0
        self.controller: runtime.Controller[Key] = runtime.Controller(
            "resolver", self.reconcile, clock, keys=artifacts.keys, concurrency=concurrency)
        artifacts.add_index(SECRET_INDEX, secret_refs)
        artifacts.add_index(CLAIM_INDEX, claim_refs)
        self.anchoring = anchoring.Anchoring(artifacts, ledger or proofs.InMemory())
        self._manifests = manifests or manifests_.Discard()
        self._kept: set[str] = set()
        """The digests whose manifest this process kept (each is written once)."""
        artifacts.add_handler(self._artifact_changed)
        secret_source.subscribe(self.secret_changed)
        claim_source.subscribe(self._claim_changed)

    # the runnable -------------------------------------------------------------------------

    async def run(self) -> None:
        await self.controller.run()

    def stop(self) -> None:
        self.controller.stop()

    # what wakes an artifact ---------------------------------------------------------------

    def _artifact_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        obj = new or old
        if obj is not None:
            self.controller.enqueue(clients.key_of(obj))

    def secret_changed(self, namespace: str, name: str) -> None:
        """A Secret changed: every artifact reading it is checked now, whatever is due."""
        for key in self._artifacts.index_keys(SECRET_INDEX, f"{namespace}/{name}"):
            obj = self._artifacts.get(*key)
            if obj is not None:
                self._forced.add(str(obj["metadata"].get("uid")))
                self.controller.enqueue(key)

    def _claim_changed(self, namespace: str, name: str) -> None:
        for key in self._artifacts.index_keys(CLAIM_INDEX, f"{namespace}/{name}"):
            self.controller.enqueue(key)

    # reconcile ----------------------------------------------------------------------------

    def _context(self, obj: wire.Obj, uid: str) -> verdict.Context:
        return verdict.Context(now=self._clock.now(),
                               generation=int(obj["metadata"].get("generation") or 1),
                               interval=self.interval, failures=self._failures.get(uid, 0))

    def _forget(self, key: Key) -> None:
        uid = self._uids.pop(key, None)
        self._written.pop(key, None)
        if uid is not None:
            self._due.pop(uid, None)
            self._forced.discard(uid)
            self._failures.pop(uid, None)
            self.anchoring.forget(uid)

    async def reconcile(self, key: Key) -> runtime.Result:
        obj = self._artifacts.get(*key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self._forget(key)
            return runtime.DONE
        uid = str(obj["metadata"].get("uid"))
        if self._uids.get(key) != uid:
            self._forget(key)
            self._uids[key] = uid
        source = source_of(obj)
        if sources.IMAGE in source:
            await self._write(obj, lambda s: verdict.offline(
                s, self._context(obj, uid), "an image source is resolved by its digest-pinned "
                "reference; nothing is contacted"))
            return runtime.DONE
        if sources.CLAIM in source:
            return await self._claim(obj, uid)
        kind = next((k for k in HUB_KINDS if k in source), None)
        if kind is None:
            await self._write(obj, lambda s: verdict.unsupported(
                s, self._context(obj, uid), "the source names no member this worker knows"))
            return runtime.DONE
        current = obj.get("status") or {}
        for again in await self.anchoring.observe(obj):
            self.controller.enqueue(again)  # an anchor that stood on a withdrawn verification
        if modelartifact.anchored(obj):
            # the hub is never contacted again, but the anchor stands only on a proof
            return await self._judge_anchor(obj, uid, modelartifact.anchor_proof(obj))
        wait = self._wait(uid, current)
        if wait is not None:
            return runtime.Result(requeue_after=wait)
        self._forced.discard(uid)
        default = sources.DEFAULT_REVISIONS[kind]
        src = passes.HubSource(kind, modelartifact.repository(obj),
                               modelartifact.source_revision(obj) or default)
        self.passes_run += 1
        if modelartifact.manifest_digest(obj):
            delay = await self._revalidate(obj, uid, src)
        else:
            delay = await self._resolve(obj, uid, src)
        if delay is None:
            self._due.pop(uid, None)
            return runtime.DONE
        self._due[uid] = self._clock.monotonic() + delay
        return runtime.Result(requeue_after=delay)

    def _wait(self, uid: str, current: wire.Obj) -> float | None:
        """Seconds until this artifact's next pass, or None when one is due now."""
        if uid in self._forced:
            return None
        due = self._due.get(uid)
        now = self._clock.monotonic()
        if due is not None:
            return due - now if due > now else None
        # Nothing remembered (a restart, or a new leader): a healthy resolved artifact keeps
        # the schedule its status records; anything else is checked now.
        validated = clocks.parse(modelartifact.last_validated(modelartifact.of_status(current)))
        healthy = (conditions.is_true(current, verdict.RESOLVED)
                   and not conditions.is_true(current, verdict.DEGRADED))
        if validated is None or not healthy:
            return None
        left = self.interval - (self._clock.now() - validated).total_seconds()
        if left <= 0:
            return None
        self._due[uid] = now + left
        return left

    def _selection(self, obj: wire.Obj) -> passes.Selection:
        return passes.Selection(tuple(modelartifact.allow_patterns(obj)),
                                tuple(modelartifact.ignore_patterns(obj)))

    async def _resolve(self, obj: wire.Obj, uid: str, src: passes.HubSource) -> float | None:
        where = f"{passes.HUB_NAMES[src.kind]} repository {src.repository} at {src.revision}"
        await self._write(obj, lambda s: verdict.starting(
            s, self._context(obj, uid), f"resolving {where}"), sets_retry=False)
        anchor = modelartifact.expected_digest(obj)
        try:
            token = await self._token(obj, src)
            found = await self._passes.resolve(src, self._selection(obj), anchor, token)
        except passes.Failure as failure:
            log.info("%s/%s: %s: %s", *clients.key_of(obj), failure.reason, failure.message)
            failed = failure
            proof, refusal = None, ""
            if anchor and failed.outage and failed.from_hub:
                proof, refusal = await self.anchoring.would_stand(
                    obj, self._clock.now(), self.interval)
            delay = await self._write(obj, lambda s: verdict.not_resolved(
                s, failed, self._context(obj, uid), anchor, proof=proof, refusal=refusal),
                default=verdict.RECHECK)
            self._count_failure(uid, failed)
            return delay
        self._failures.pop(uid, None)
        await self._keep(found.digest, found.entries)
        return await self._write(obj, lambda s: verdict.resolved(
            s, found, self._context(obj, uid), where), default=self.interval)

    async def _revalidate(self, obj: wire.Obj, uid: str,
                          src: passes.HubSource) -> float | None:
        where = f"{passes.HUB_NAMES[src.kind]} repository {src.repository} at {src.revision}"
        anchored = bool(modelartifact.expected_digest(obj))
        try:
            token = await self._token(obj, src)
            entries = await self._passes.revalidate(
                src, modelartifact.revision(obj), modelartifact.manifest_digest(obj),
                self._selection(obj), anchored=anchored, token=token)
        except passes.Failure as failure:
            log.info("%s/%s revalidation: %s: %s", *clients.key_of(obj), failure.reason,
                     failure.message)
            failed = failure
            delay = await self._write(obj, lambda s: verdict.refused(
                s, failed, self._context(obj, uid)), default=verdict.RECHECK)
            self._count_failure(uid, failed)
            return delay
        self._failures.pop(uid, None)
        await self._keep(modelartifact.manifest_digest(obj), entries)
        return await self._write(obj, lambda s: verdict.confirmed(
            s, self._context(obj, uid), where), default=self.interval)

    async def _judge_anchor(self, obj: wire.Obj, uid: str, standing: str) -> runtime.Result:
        """An artifact resolved to its anchor: it keeps standing on a proof, takes up another
        when its own is gone, or loses the resolution."""
        try:
            proof = await self.anchoring.proof(obj, self._clock.now(), self.interval,
                                               keeping=standing)
        except errors.ApiError as exc:
            log.warning("%s/%s: the anchor's proof cannot be checked now: %s",
                        *clients.key_of(obj), exc.message)
            return runtime.Result(requeue_after=verdict.RECHECK)
        ctx = self._context(obj, uid)
        if proof is None:
            refusal = self.anchoring.refusal(obj, self.interval)
            log.info("%s/%s: %s: %s", *clients.key_of(obj), reasons.ANCHOR_NOT_GRANTED, refusal)
            await self._write(obj, lambda s: verdict.anchor_withdrawn(s, ctx, refusal))
        elif proof.kind != standing:
            found = proof
            await self._write(obj, lambda s: verdict.anchor_proven(s, found, ctx))
        return runtime.DONE

    async def _keep(self, digest: str, entries: Sequence[manifest.Entry]) -> None:
        """Record the manifest once per digest; a failure is logged and tried again with the
        digest's next pass (the resolution stands without it)."""
        if digest in self._kept or not entries:
            return
        try:
            await self._manifests.keep(digest, manifest.canonical_bytes(entries))
        except errors.ApiError as exc:
            log.warning("the manifest of %s is not recorded now: %s", digest, exc.message)
            return
        self._kept.add(digest)

    def _count_failure(self, uid: str, failure: passes.Failure) -> None:
        """Refusals back off (a minute, doubling); outages are retried every minute."""
        if not failure.outage:
            self._failures[uid] = self._failures.get(uid, 0) + 1

    async def _claim(self, obj: wire.Obj, uid: str) -> runtime.Result:
        namespace = obj["metadata"].get("namespace") or ""
        name = modelartifact.claim_name(obj)
        ctx = self._context(obj, uid)
        try:
            present = self._claims.exists(namespace, name)
        except claims.ClaimUnreadable as exc:
            log.info("%s/%s: %s", namespace, obj["metadata"]["name"], exc)
            return runtime.Result(requeue_after=verdict.RECHECK)
        if present:
            message = (f"PersistentVolumeClaim {name} exists" if self._claims.checked else
                       "standalone mode does not check claims: the artifact resolves at once "
                       f"and PersistentVolumeClaim {name} is the cluster's to provide")
            await self._write(obj, lambda s: verdict.offline(s, ctx, message))
        else:
            await self._write(obj, lambda s: verdict.claim_missing(
                s, ctx, f"PersistentVolumeClaim {name} not found in namespace {namespace}"))
        return runtime.DONE

    async def _token(self, obj: wire.Obj, src: passes.HubSource) -> str | None:
        name = modelartifact.secret_name(obj)
        if not name:
            return None
        namespace = str(obj["metadata"].get("namespace") or "")
        try:
            token = await self._secrets.token(namespace, name)
        except secrets.SecretMissing as exc:
            raise passes.Failure(reasons.SECRET_NOT_FOUND, str(exc), from_hub=False) from None
        except secrets.SecretUnreadable as exc:
            raise passes.Failure(reasons.SOURCE_UNAVAILABLE, str(exc), from_hub=False) from None
        if src.kind == sources.MODEL_SCOPE:
            await self._check_new_token(obj, namespace, name, token)
        return token

    async def _check_new_token(self, obj: wire.Obj, namespace: str, name: str, token: str) -> None:
        """ModelScope answers a mistyped token like a missing grant, so each new token is asked
        about once (``users/me``) and a rejection is a Warning event."""
        print_ = secrets.fingerprint(token)
        if self._tokens_checked.get((namespace, name)) == print_:
            return
        try:
            await self._hubs.modelscope().check_token(token=token)
        except hub_errors.HubError as exc:
            if exc.reason != reasons.ACCESS_DENIED:
                return  # the hub did not say; ask again with the next pass
            self._recorder.record(obj, "Warning", "InvalidToken",
                                  f"ModelScope rejected the token in Secret {namespace}/{name}")
        self._tokens_checked[(namespace, name)] = print_

    async def _write(self, obj: wire.Obj, change: Callable[[wire.Obj], float | None], *,
                     default: float | None = None, sets_retry: bool = True) -> float | None:
        """Write the status ``change`` makes (re-read and reapplied on conflict); returns what
        ``change`` returned (``default`` if the artifact went away meanwhile). A write that
        ``sets_retry`` sets ``status.retryTime`` from the delay ``change`` returns; the note
        before a pass does not, so it writes nothing when it changes nothing."""
        namespace, name = clients.key_of(obj)
        outcome: list[float | None] = []
        before = conditions.find(obj.get("status") or {}, verdict.RESOLVED) or {}

        def apply(current: wire.Obj) -> None:
            outcome[:] = [change(current)]
            if sets_retry:
                verdict.retry_at(current, outcome[0], self._clock.now())

        first = _newest(obj, self._written.get((namespace, name)))
        try:
            written = await status.write(self._api, clients.MODEL_ARTIFACTS, namespace, name,
                                         apply, uid=str(obj["metadata"].get("uid")), first=first)
        except status.Gone:
            return default
        if written is not None:
            self._written[(namespace, name)] = written
            after = conditions.find(written.get("status") or {}, verdict.RESOLVED) or {}
            if (after.get("status"), after.get("reason")) != (before.get("status"),
                                                               before.get("reason")):
                if after.get("status") == "True":
                    self._recorder.record(written, "Normal", reasons.RESOLVED,
                                          str(after.get("message") or ""))
                elif after.get("status") == "False":
                    self._recorder.record(written, "Warning", str(after.get("reason")),
                                          str(after.get("message") or ""))
        return outcome[0] if outcome else default


def _newest(seen: wire.Obj, written: wire.Obj | None) -> wire.Obj:
    """The later of the informer's copy and the object this resolver last wrote (the informer
    may not have seen that write yet; starting from it saves a conflict)."""
    if written is None or written["metadata"].get("uid") != seen["metadata"].get("uid"):
        return seen

    def version(obj: wire.Obj) -> int:
        text = str(obj["metadata"].get("resourceVersion") or "0")
        return int(text) if text.isdigit() else 0

    return written if version(written) > version(seen) else seen
