"""Telling people what happened to an artifact: the ``Recorder`` seam.

Standalone mode has no Events API, so ``LogRecorder`` writes one log line per event; in a cluster
``kubeevents.KubeRecorder`` writes ``core/v1`` Events. Messages are the controllers' own (they
never carry a token).
"""

from __future__ import annotations

import logging
from typing import Literal, Protocol

from openapi import wire

log = logging.getLogger("controllers.events")

Kind = Literal["Normal", "Warning"]


class Recorder(Protocol):
    def record(self, obj: wire.Obj, kind: Kind, reason: str, message: str) -> None: ...

    async def flush(self) -> None:
        """Wait for what is being recorded (on stop)."""
        ...


class LogRecorder:
    def record(self, obj: wire.Obj, kind: Kind, reason: str, message: str) -> None:
        metadata = obj.get("metadata") or {}
        level = logging.WARNING if kind == "Warning" else logging.INFO
        log.log(level, "%s %s/%s %s: %s", obj.get("kind", "object"),
                metadata.get("namespace", ""), metadata.get("name", ""), reason, message)

    async def flush(self) -> None:
        return None
