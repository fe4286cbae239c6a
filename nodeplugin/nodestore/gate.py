"""The materializer the rest of the plugin sees: the real one, behind the node spec's verdict.

While the node's spec fails its check (or the start-up hub flags are unusable), no download
starts: every new digest fails ``InvalidRequest`` saying why, while published content keeps
mounting and running attempts finish. When a valid spec arrives the inner materializer may be
replaced (the start-up one could not be built); the gate keeps the completion callbacks and the
byte counters across that. It also tells ``started`` when a new attempt begins, so the status
reporter lists a new download at once instead of at its next tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from nodeplugin.cache import layout
from nodeplugin.materialize import interface

log = logging.getLogger(__name__)


class Gate:
    def __init__(
        self,
        inner: interface.Materializer,
        cache: layout.Layout,
        *,
        refusal: str | None = None,
        started: Callable[[str], None] = lambda digest: None,
    ) -> None:
        self._inner = inner
        self._cache = cache
        self.refusal = refusal
        self.on_started = started
        """Called with the digest of each attempt that starts (the status reporter)."""
        self._done = interface.DoneCallbacks()
        self._retired: list[interface.Materializer] = []
        inner.add_done_callback(self._done.notify)

    @property
    def inner(self) -> interface.Materializer:
        return self._inner

    def refuse(self, message: str) -> None:
        """New digests fail ``InvalidRequest`` with ``message`` until ``open``."""
        self.refusal = message

    def open(self) -> None:
        self.refusal = None

    def replace(self, inner: interface.Materializer) -> None:
        """Use ``inner`` for new attempts; the old one is closed with the gate (its running
        attempts, if any, finish first)."""
        self._retired.append(self._inner)
        self._inner = inner
        inner.add_done_callback(self._done.notify)

    async def ensure(self, request: interface.Request) -> interface.Progress:
        if self.refusal is not None:
            running = {p.digest for p in self._inner.running()}
            published = await asyncio.to_thread(self._cache.is_published, request.digest)
            if published:
                return interface.Progress(request.digest, interface.State.PUBLISHED)
            if request.digest not in running:
                return interface.Progress(
                    request.digest, interface.State.FAILED,
                    reason=interface.Reason.INVALID_REQUEST, message=self.refusal,
                )  # fmt: skip
        before = {p.digest for p in self._inner.running()}
        progress = await self._inner.ensure(request)
        if progress.state is interface.State.DOWNLOADING and request.digest not in before:
            self.on_started(request.digest)
        return progress

    def running(self) -> list[interface.Progress]:
        found = {p.digest: p for m in self._retired for p in m.running()}
        found.update((p.digest, p) for p in self._inner.running())
        return list(found.values())

    @property
    def downloaded_bytes(self) -> int:
        return self._inner.downloaded_bytes + sum(m.downloaded_bytes for m in self._retired)

    def add_done_callback(self, callback: interface.DoneCallback) -> None:
        self._done.add(callback)

    async def close(self) -> None:
        for materializer in (*self._retired, self._inner):
            try:
                await materializer.close()
            except Exception:
                log.exception("closing a materializer failed")
