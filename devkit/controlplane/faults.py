"""What the tests can see (every request, counted) and break (a held, failing or dropped
endpoint) on the control plane. Holds are gates the test opens, never sleeps."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
from collections.abc import Iterator
from typing import Any

GUARD_SECONDS = 60.0


@dataclasses.dataclass
class Recorded:
    """One request, recorded when it arrived; ``code`` is filled in when it is answered (0 while
    in flight, or when the connection was dropped)."""

    method: str
    path: str
    query: str
    user: str
    headers: dict[str, str]
    body: Any
    code: int


class Recorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []

    def add(self, entry: Recorded) -> None:
        with self._lock:
            self._requests.append(entry)

    def requests(self, path: str | None = None, method: str | None = None) -> list[Recorded]:
        """Recorded requests, optionally those whose path ends with ``path`` (e.g.
        ``"/tokenreviews"``) and that used ``method``."""
        with self._lock:
            found = list(self._requests)
        return [
            r
            for r in found
            if (path is None or r.path.endswith(path)) and (method is None or r.method == method)
        ]

    def count(self, path: str | None = None, method: str | None = None) -> int:
        return len(self.requests(path, method))

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()


@dataclasses.dataclass
class Fault:
    """Matches requests whose ``METHOD path`` the pattern searches; then ``hold`` blocks the
    request until ``release()`` (or the guard timeout), ``fail`` answers that code with a Status,
    ``drop`` closes the connection without an answer."""

    pattern: re.Pattern[str]
    action: str  # "hold", "fail" or "drop"
    code: int = 500
    message: str = "injected failure"
    remaining: int | None = None  # None: every matching request
    gate: threading.Event = dataclasses.field(default_factory=threading.Event)
    entered: threading.Event = dataclasses.field(default_factory=threading.Event)
    hits: int = 0

    def release(self) -> None:
        self.gate.set()

    def wait_entered(self, timeout: float = GUARD_SECONDS) -> bool:
        """Block until a request is being held (so a test knows the call is in flight)."""
        return self.entered.wait(timeout)


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        fault.release()
        with self._lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def match(self, method: str, path: str) -> Fault | None:
        line = f"{method} {path}"
        with self._lock:
            for fault in self._faults:
                if fault.remaining == 0 or not fault.pattern.search(line):
                    continue
                fault.hits += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                return fault
        return None

    def release_all(self) -> None:
        with self._lock:
            for fault in self._faults:
                fault.release()

    @contextlib.contextmanager
    def injected(self, fault: Fault) -> Iterator[Fault]:
        self.add(fault)
        try:
            yield fault
        finally:
            self.remove(fault)
