"""kube-apiserver's version, for the image-source floor: read at start, re-read periodically.

Admission asks ``current()`` at every create. Until a first read succeeds it is None, which
refuses image sources (the floor cannot be checked); a later failed read keeps the last version
read, since a cluster does not downgrade between two reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import kube

log = logging.getLogger(__name__)

REFRESH_SECONDS = 600.0
RETRY_SECONDS = 30.0


class ClusterVersion:
    def __init__(self, client: kube.Client, *, refresh_seconds: float = REFRESH_SECONDS,
                 retry_seconds: float = RETRY_SECONDS) -> None:
        self.client = client
        self.refresh_seconds = refresh_seconds
        self.retry_seconds = retry_seconds
        self.value: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None

    def current(self) -> tuple[int, int] | None:
        return self.value

    async def refresh(self) -> bool:
        try:
            found = kube.minor_version(await self.client.version())
        except (kube.KubeError, ValueError) as exc:
            log.warning("cannot read kube-apiserver's /version (%s); image sources are refused "
                        "until it can be read", type(exc).__name__ if isinstance(exc, ValueError)
                        else f"{exc.code} {exc.reason}")
            return False
        if found != self.value:
            log.info("kube-apiserver is version %d.%d", *found)
        self.value = found
        return True

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        ok = self.value is not None
        while True:
            await asyncio.sleep(self.refresh_seconds if ok else self.retry_seconds)
            ok = await self.refresh() or self.value is not None
