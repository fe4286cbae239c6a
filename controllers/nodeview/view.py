"""The NodeView: the NodeModelStore informer, the digest index over it, the progress view, the
copies view and the artifacts' node counts (``status.nodes``).
Every API server runs it whatever ``--controllers`` says (``progress`` and the counts are part
of the API: every replica answers them, leader or not), and the controllers read the same
informer and index."""

from __future__ import annotations

import asyncio

from controllers.nodeview import copies, counts, progress
from controllers.nodeview import index as nodeindex
from controllers.runtime import client as clients
from controllers.runtime import informer
from timing import clock as clocks


class NodeView:
    def __init__(self, api: clients.Client, clock: clocks.Clock,
                 reader: progress.LiveReader | None,
                 limits: progress.Limits = progress.DEFAULT_LIMITS) -> None:
        """``reader``: the plugins' live downloads (None: the stored bytes only)."""
        self.informer = informer.Informer(api, clients.NODE_MODEL_STORES, clock)
        self.index = nodeindex.DigestIndex(self.informer)
        self.progress = progress.Progress(self.index, reader, clock, limits)
        self.copies = copies.Copies(self.index, reader, clock, limits)
        self.counts = counts.Counts(self.index)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.informer.run(), name="informer nodemodelstores")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
