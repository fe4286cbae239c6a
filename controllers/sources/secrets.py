"""Where an artifact's hub token comes from: the Secret ``spec.source.*.secretRef`` names, key
``token``, in the artifact's namespace.

``Secrets`` is the seam: ``token`` reads it on demand; ``subscribe`` hears about changes (the
resolver revalidates every artifact naming a changed Secret). Standalone mode reads
``DIR/<namespace>/<name>/token`` (``DirSecrets``); a cluster reads Secrets through the Kubernetes
API (``kubesecrets.KubeSecrets``). A token is never logged, echoed or kept beyond the pass that
uses it (only a fingerprint, to tell a new token from the old).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import pathlib
import re
from collections.abc import Callable
from typing import Protocol

from openapi import sources
from timing import clock as clocks

log = logging.getLogger(__name__)

MAX_TOKEN_BYTES = 64 * 1024
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")

Listener = Callable[[str, str], None]
"""Called with (namespace, name) of a Secret that appeared, changed or disappeared."""


class SecretMissing(Exception):
    """The Secret, or its ``token`` key, does not exist: ``SecretNotFound``."""


class SecretUnreadable(Exception):
    """The Secret could not be read (permissions, the API or the disk failing): treated like an
    outage, never as a verdict."""


class Secrets(Protocol):
    async def token(self, namespace: str, name: str) -> str: ...

    def subscribe(self, listener: Listener) -> None: ...

    async def run(self) -> None:
        """Watch for changes until cancelled."""
        ...


def fingerprint(token: str) -> str:
    """Tells tokens apart without keeping them (for the new-token check)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def decode(raw: bytes, where: str) -> str:
    if len(raw) > MAX_TOKEN_BYTES:
        raise SecretUnreadable(f"{where}: the token is larger than {MAX_TOKEN_BYTES} bytes")
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SecretUnreadable(f"{where}: the token is not UTF-8 text") from None
    if not token:
        raise SecretMissing(f"{where}: the token is empty")
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in token):
        raise SecretUnreadable(f"{where}: the token contains whitespace or control characters")
    return token


class NoSecrets:
    """No Secret source configured: every secretRef is missing."""

    async def token(self, namespace: str, name: str) -> str:
        raise SecretMissing(f"Secret {namespace}/{name}: no Secret source is configured "
                            "(standalone mode reads them from --secrets-dir)")

    def subscribe(self, listener: Listener) -> None:
        return None

    async def run(self) -> None:
        await asyncio.Event().wait()


class DirSecrets:
    """``DIR/<namespace>/<name>/token``, polled for changes every ``poll`` seconds (a stat per
    Secret; content is read only when a pass needs it)."""

    def __init__(self, root: pathlib.Path, clock: clocks.Clock, *, poll: float = 2.0) -> None:
        self.root = root
        self._clock = clock
        self._poll = poll
        self._listeners: list[Listener] = []
        self._seen: dict[tuple[str, str], tuple[int, int, int]] = {}

    def _path(self, namespace: str, name: str) -> pathlib.Path:
        if not _NAME.fullmatch(namespace) or not _NAME.fullmatch(name):
            raise SecretMissing(f"Secret {namespace}/{name}: not a valid namespace and name")
        return self.root / namespace / name / sources.SECRET_TOKEN_KEY

    async def token(self, namespace: str, name: str) -> str:
        path = self._path(namespace, name)
        where = f"Secret {namespace}/{name}"
        try:
            raw = await asyncio.to_thread(_read_limited, path)
        except FileNotFoundError:
            if (self.root / namespace / name).is_dir():
                raise SecretMissing(f"{where} has no key {sources.SECRET_TOKEN_KEY!r}") from None
            raise SecretMissing(f"{where} not found") from None
        except OSError as exc:
            raise SecretUnreadable(f"{where} could not be read ({type(exc).__name__})") from None
        return decode(raw, where)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _report(self, current: dict[tuple[str, str], tuple[int, int, int]]) -> None:
        changed = {k for k in current.keys() | self._seen.keys()
                   if current.get(k) != self._seen.get(k)}
        self._seen = current
        for namespace, name in sorted(changed):
            for listener in self._listeners:
                listener(namespace, name)

    def scan(self) -> None:
        """Compare the directory with the last scan and tell listeners what changed."""
        self._report(_stat_all(self.root))

    async def run(self) -> None:
        self._seen = await asyncio.to_thread(_stat_all, self.root)
        while True:
            await clocks.sleep(self._clock, self._poll)
            try:
                current = await asyncio.to_thread(_stat_all, self.root)
            except OSError as exc:
                log.warning("cannot scan %s: %s", self.root, type(exc).__name__)
                continue
            self._report(current)


def _read_limited(path: pathlib.Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(MAX_TOKEN_BYTES + 1)


def _stat_all(root: pathlib.Path) -> dict[tuple[str, str], tuple[int, int, int]]:
    found: dict[tuple[str, str], tuple[int, int, int]] = {}
    try:
        namespaces = list(os.scandir(root))
    except FileNotFoundError:
        return found
    for namespace in namespaces:
        if not namespace.is_dir():
            continue
        try:
            names = list(os.scandir(namespace.path))
        except OSError:
            continue
        for entry in names:
            try:
                info = os.stat(os.path.join(entry.path, sources.SECRET_TOKEN_KEY))
            except OSError:
                continue
            found[(namespace.name, entry.name)] = (info.st_ino, info.st_mtime_ns, info.st_size)
    return found
