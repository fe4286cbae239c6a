"""What kube-apiserver 1.36 answers to a read from a resourceVersion it has not reached, from the
recording in ``tests/data/kube-samples/resource-version-too-large.json`` (its README says how it
was made), with another request's numbers put in: what our server must answer, byte for byte in
meaning, on every backend."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.unit.apiserver.auth import samples

RECORDING = samples.load("resource-version-too-large")
CACHED = RECORDING["watchCache"]["answers"]
"""kube-apiserver as configured by default (watch cache on)."""
UNCACHED = RECORDING["noWatchCache"]["answers"]
"""With ``--watch-cache=false``: the only recording of ``sendInitialEvents`` from the future."""

_NUMBERS = re.compile(r"Too large resource version: \d+, current: \d+")


def status(answer: dict[str, Any], requested: int, current: int) -> dict[str, Any]:
    """The recorded Status body (a watch's: its one ERROR event's object) for ``requested``
    and ``current`` instead of the recording's."""
    body = answer["body"]
    found = body[0]["object"] if isinstance(body, list) else body
    found = copy.deepcopy(found)
    found["message"] = _NUMBERS.sub(
        f"Too large resource version: {requested}, current: {current}", found["message"])
    return found


def retry_after(answer: dict[str, Any]) -> str | None:
    """The recorded ``Retry-After`` header, None when there was none."""
    value = answer["headers"].get("Retry-After")
    return str(value) if value is not None else None
