"""``kubectl model progress NAME [--watch] [-o json]``: one look, or looks every ``interval``
seconds until the artifact is ready somewhere and nothing downloads (``Snapshot.done``).

A terminal gets rich's live table (bars redrawn in place); a pipe gets a line per change; ``-o
json`` prints the ``progress`` object (again each time it changes, with ``--watch``). While
watching, an answer that failed on the way (a 5xx, a lost connection) is retried at the next
look; a refusal, a missing artifact or a resolution failure retrying cannot fix (no such
repository or revision, access denied: the artifact's terminal reason) ends the command with exit
code 1. Every look reads the artifact afresh
(no resourceVersion is kept between looks), and when it is another object than the last look's
(a new UID: deleted and created again) or an older state of it (its resourceVersion went back:
the server's store went back), what the command built from the earlier looks (the rates, the
lines printed) starts over.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

import kube
from kube import gpustack
from kubectlmodel import render, snapshot

TRANSIENT = (kube.ServerError, kube.ConnectionFailed)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Command:
    """One ``progress`` run: its reader, the rates between its looks, where it writes."""

    def __init__(self, models: gpustack.ModelManager, namespace: str, name: str, *,
                 console: Console, out: TextIO, interval: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime.datetime] = _now) -> None:
        self.reader = snapshot.Reader(models, namespace, name)
        self.console = console
        self.out = out
        self.interval = interval
        self.monotonic = monotonic
        self.now = now
        self.rates = snapshot.Rates()
        self.restarts = 0
        """How many times the artifact turned out another object, or older (see above)."""
        self._seen: tuple[str, int] | None = None

    async def take(self) -> snapshot.Snapshot:
        shot = await self.reader.take(self.monotonic(), self.now())
        meta = shot.artifact.raw.get("metadata") or {}
        seen = (str(meta.get("uid") or ""), _version(meta.get("resourceVersion")))
        if self._seen is not None and (seen[0] != self._seen[0] or seen[1] < self._seen[1]):
            self.rates = snapshot.Rates()
            self.restarts += 1
        self._seen = seen
        return shot

    async def looks(self, watch: bool) -> snapshot.Snapshot:
        """The next snapshot; while watching, a transient failure waits for the next look, and a
        resolution failure retrying cannot fix ends the watch (``ResolutionFailed``: exit 1)."""
        while True:
            try:
                shot = await self.take()
            except TRANSIENT as failure:
                if not watch or isinstance(failure, kube.TLSError):  # a TLS refusal stays one
                    raise
                self.on_transient(failure)
                await asyncio.sleep(self.interval)
                continue
            terminal = shot.artifact.failure()
            if watch and terminal is not None:
                raise terminal
            return shot

    def on_transient(self, failure: kube.KubeError) -> None:
        """Said above the live view on a terminal; on stderr when stdout is data."""
        said = Text(f"retrying: {render.cut(str(failure))}", "yellow")
        target = self.console if self.console.is_terminal else Console(stderr=True)
        target.print(said, highlight=False)

    async def json(self, watch: bool) -> int:
        last: dict[str, object] | None = None
        while True:
            shot = await self.looks(watch)
            body = {k: v for k, v in shot.progress.items() if k != "timestamp"}
            if body != last:
                self.out.write(json.dumps(shot.progress, indent=2) + "\n")
                self.out.flush()
                last = body
            if not watch or shot.done:
                return 0
            await asyncio.sleep(self.interval)

    async def lines(self, watch: bool) -> int:
        printed: dict[str, tuple[object, ...]] = {}
        restarts = self.restarts
        while True:
            shot = await self.looks(watch)
            if self.restarts != restarts:
                printed, restarts = {}, self.restarts
            for line in render.lines(shot, render.rates_for(shot, self.rates)):
                if printed.get(line.key) != line.change:
                    self.out.write(line.text + "\n")
                    printed[line.key] = line.change
            self.out.flush()
            if not watch or shot.done:
                return 0
            await asyncio.sleep(self.interval)

    async def terminal(self, watch: bool) -> int:
        shot = await self.looks(watch)
        if not watch:
            self.console.print(render.frame(shot, render.rates_for(shot, self.rates)))
            return 0
        with Live(render.frame(shot, render.rates_for(shot, self.rates)),
                  console=self.console, refresh_per_second=4) as live:
            while not shot.done:
                await asyncio.sleep(self.interval)
                shot = await self.looks(watch)
                live.update(render.frame(shot, render.rates_for(shot, self.rates)))
        return 0


def _version(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


async def run(models: gpustack.ModelManager, namespace: str, name: str, *, watch: bool,
              output: str, console: Console, out: TextIO, interval: float) -> int:
    command = Command(models, namespace, name, console=console, out=out, interval=interval)
    if output == "json":
        return await command.json(watch)
    if console.is_terminal:
        return await command.terminal(watch)
    return await command.lines(watch)
