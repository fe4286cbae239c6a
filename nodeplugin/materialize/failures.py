"""Failure records per digest: the reason, the count, and when the next attempt may start.

A failure backs off one minute after the first, doubling to one hour; a success clears the record.
``InvalidRequest`` and ``Canceled`` are recorded for status but never back off; an
``InvalidRequest`` is still answered once, so the next mount learns why the last attempt ended.
Records live in ``state/`` (one small JSON file per digest, written atomically) so a restart keeps
the backoff. Both materializers (hub downloads and local imports) keep their failures here.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
from collections.abc import Callable

from nodeplugin.cache import layout, records
from nodeplugin.materialize import interface
from timing import backoff as backoffs

RETRY = backoffs.Backoff(60.0, 3600.0)
"""The wait after a digest's n-th failure in a row: a minute, doubling to an hour."""
NO_BACKOFF = frozenset({interface.Reason.INVALID_REQUEST, interface.Reason.CANCELED})
REPORT_ONCE = frozenset({interface.Reason.INVALID_REQUEST})


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    digest: str
    reason: interface.Reason
    message: str
    failures: int
    """Consecutive failures that back off (``NO_BACKOFF`` reasons do not count)."""
    last_failure: datetime.datetime
    retry_time: datetime.datetime | None


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Failures:
    """The failure records of one cache; ``record``/``clear`` block briefly (one small write)."""

    def __init__(
        self,
        cache: layout.Layout,
        *,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self._clock = clock
        # A torn or foreign record must not stop the plugin; it only loses a backoff.
        self._files = records.DigestRecords(cache, "download-failure-", "failure")
        self._records = {failure.digest: failure for failure in self._files.load(_decode)}
        self._unreported: set[str] = set()
        self.started: collections.Counter[interface.Reason] = collections.Counter()
        """Backoffs this process started, by the failure's reason (the metrics' counter)."""

    def get(self, digest: str) -> Failure | None:
        return self._records.get(digest)

    def blocking(self, digest: str) -> Failure | None:
        """The record while it still forbids a new attempt (``retry_time`` in the future)."""
        record = self._records.get(digest)
        if record is None or record.retry_time is None or record.retry_time <= self._clock():
            return None
        return record

    def answer(self, digest: str) -> Failure | None:
        """What a new ``ensure`` answers instead of starting an attempt: the record while it
        backs off, or (once) a ``REPORT_ONCE`` record; None when an attempt may start."""
        blocked = self.blocking(digest)
        if blocked is not None:
            return blocked
        if digest in self._unreported:
            self._unreported.discard(digest)
            return self._records.get(digest)
        return None

    def all(self) -> list[Failure]:
        return list(self._records.values())

    def waiting(self) -> collections.Counter[interface.Reason]:
        """The digests whose next attempt must wait now, by the reason of their last failure
        (memory only)."""
        now = self._clock()
        return collections.Counter(record.reason for record in self._records.values()
                                   if record.retry_time is not None and record.retry_time > now)

    def record(self, digest: str, reason: interface.Reason, message: str) -> Failure:
        now = self._clock()
        previous = self._records.get(digest)
        count = previous.failures if previous else 0
        retry_time: datetime.datetime | None = None
        if reason not in NO_BACKOFF:
            count += 1
            retry_time = now + datetime.timedelta(seconds=RETRY.delay(count))
            self.started[reason] += 1
        failure = Failure(digest, reason, message, count, now, retry_time)
        self._records[digest] = failure
        if reason in REPORT_ONCE:
            self._unreported.add(digest)
        else:
            self._unreported.discard(digest)
        self._files.write(digest, _encode(failure))
        return failure

    def clear(self, digest: str) -> None:
        self._unreported.discard(digest)
        if self._records.pop(digest, None) is not None:
            self._files.delete(digest)


def _encode(failure: Failure) -> bytes:
    body = {
        "digest": failure.digest,
        "reason": failure.reason.value,
        "message": failure.message,
        "failures": failure.failures,
        "lastFailure": failure.last_failure.isoformat(),
        "retryTime": failure.retry_time.isoformat() if failure.retry_time else None,
    }
    return json.dumps(body, sort_keys=True).encode()


def _decode(data: bytes) -> Failure:
    body = json.loads(data)
    layout.hex_of(body["digest"])
    retry = body["retryTime"]
    return Failure(
        digest=body["digest"],
        reason=interface.Reason(body["reason"]),
        message=str(body["message"]),
        failures=int(body["failures"]),
        last_failure=datetime.datetime.fromisoformat(body["lastFailure"]),
        retry_time=datetime.datetime.fromisoformat(retry) if retry else None,
    )
