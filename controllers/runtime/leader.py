"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

One replica holds the Lease and renews it every ``retry_period``; the others try as often and
take it only once the holder has not renewed for ``lease_duration``, measured on their own clock
from when they last saw the record change (so clock skew between replicas does not matter). A
leader that cannot renew for ``renew_deadline`` stops its controllers before the lease can pass
to another replica (``renew_deadline`` < ``lease_duration``). A graceful stop releases the Lease
so a successor need not wait. Standalone mode has one replica: ``AlwaysLeader``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
import socket
import uuid
from typing import Protocol

from controllers.runtime import errors
from openapi import wire
from timing import clock as clocks

log = logging.getLogger(__name__)



class AlwaysLeader:
    async def acquire(self) -> None:
        return None

    async def hold(self) -> None:
        await asyncio.Event().wait()

    async def release(self) -> None:
        return None


class LeaseApi(Protocol):
    async def get(self, namespace: str, name: str) -> wire.Obj:
        """The Lease; ``errors.NotFound`` when there is none."""
        ...

    async def create(self, lease: wire.Obj) -> wire.Obj:
        """``errors.Conflict`` when it already exists."""
        ...

    async def update(self, lease: wire.Obj) -> wire.Obj:
        """Replace (with its resourceVersion); ``errors.Conflict`` when it changed."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Timing:
    """client-go's leader-election durations, in seconds; these defaults are the flags' (the
    only copy of them)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problem(self) -> str:
        """Why these durations cannot elect safely, or "" when they can."""
        if self.renew_deadline >= self.lease_duration:
            return "the renew deadline must be shorter than the lease duration"
        return ""


def identity() -> str:
    """This replica's name in the Lease: the Pod name (``POD_NAME``) or the host, plus a
    random suffix so a restarted replica is a new holder."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


def micro_time(moment: datetime.datetime) -> str:
    """``metav1.MicroTime``: RFC 3339 with microseconds."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(self, api: LeaseApi, clock: clocks.Clock, *, namespace: str, name: str,
                 identity: str, timing: Timing = Timing()) -> None:
        if timing.problem():
            raise ValueError(timing.problem())
        self._api = api
        self._clock = clock
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self._observed: tuple[str, str, float] | None = None  # holder, renewTime, when seen
        self._leading = False

    @property
    def leading(self) -> bool:
        return self._leading

    async def acquire(self) -> None:
        while True:
            if await self._try():
                log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
                self._leading = True
                return
            await clocks.sleep(self._clock, self.timing.retry_period)

    async def hold(self) -> None:
        last_renewed = self._clock.monotonic()
        while True:
            await clocks.sleep(self._clock, self.timing.retry_period)
            if await self._try():
                last_renewed = self._clock.monotonic()
                continue
            if self._clock.monotonic() - last_renewed >= self.timing.renew_deadline:
                log.warning("could not renew lease %s/%s for %.0fs", self.namespace, self.name,
                            self.timing.renew_deadline)
                self._leading = False
                return

    async def release(self) -> None:
        if not self._leading:
            return
        self._leading = False
        try:
            lease = await self._api.get(self.namespace, self.name)
            spec = lease.setdefault("spec", {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = micro_time(self._clock.now())
            await self._api.update(lease)
            log.info("released lease %s/%s", self.namespace, self.name)
        except (errors.ApiError, OSError) as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)

    def _expired(self, holder: str, renew: str, duration: float) -> bool:
        now = self._clock.monotonic()
        if self._observed is None or self._observed[:2] != (holder, renew):
            self._observed = (holder, renew, now)
        return now - self._observed[2] >= duration

    async def _try(self) -> bool:
        """One attempt to take or renew the lease; False when another replica holds it or the
        API failed."""
        now = micro_time(self._clock.now())
        duration = int(self.timing.lease_duration)
        try:
            try:
                lease = await self._api.get(self.namespace, self.name)
            except errors.NotFound:
                await self._api.create({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": duration,
                             "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
                })
                return True
            spec = lease.setdefault("spec", {})
            holder = str(spec.get("holderIdentity") or "")
            if holder != self.identity:
                held_for = float(spec.get("leaseDurationSeconds") or duration)
                if holder and not self._expired(holder, str(spec.get("renewTime") or ""),
                                                held_for):
                    return False
                spec["acquireTime"] = now
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["holderIdentity"] = self.identity
            spec["leaseDurationSeconds"] = duration
            spec["renewTime"] = now
            await self._api.update(lease)
            return True
        except errors.Conflict:
            return False
        except (errors.ApiError, OSError) as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return False
