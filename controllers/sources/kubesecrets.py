"""Secrets from the Kubernetes API: read with ``get`` when a pass needs the token, watched for
changes (every namespace) so the artifacts naming a changed Secret are checked at once.

The watcher keeps only each Secret's resourceVersion, never its data; after a relist it reports
only the Secrets whose version differs from what it had. Its list-and-watch loop is
``kube.informer.Reflector``, the one every informer of ours runs.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from controllers.runtime import client as clients
from controllers.runtime import errors
from controllers.sources import secrets
from kube import informer as reflectors
from openapi import sources, wire
from timing import backoff as backoffs
from timing import clock as clocks

log = logging.getLogger(__name__)


class KubeSecrets:
    def __init__(self, api: clients.Client, clock: clocks.Clock,
                 backoff: backoffs.Backoff = reflectors.BACKOFF) -> None:
        self._api = api
        self._clock = clock
        self._backoff = backoff
        self._listeners: list[secrets.Listener] = []
        self._versions: dict[tuple[str, str], str] = {}

    def subscribe(self, listener: secrets.Listener) -> None:
        self._listeners.append(listener)

    async def token(self, namespace: str, name: str) -> str:
        where = f"Secret {namespace}/{name}"
        try:
            secret = await self._api.get(clients.SECRETS, namespace, name)
        except errors.NotFound:
            raise secrets.SecretMissing(f"{where} not found") from None
        except errors.ApiError as exc:
            raise secrets.SecretUnreadable(f"{where} could not be read (HTTP {exc.code})") from None
        raw = (secret.get("data") or {}).get(sources.SECRET_TOKEN_KEY)
        if raw is None:
            text = (secret.get("stringData") or {}).get(sources.SECRET_TOKEN_KEY)
            if text is None:
                raise secrets.SecretMissing(f"{where} has no key {sources.SECRET_TOKEN_KEY!r}")
            return secrets.decode(str(text).encode(), where)
        try:
            value = base64.b64decode(str(raw), validate=True)
        except (binascii.Error, ValueError):
            raise secrets.SecretUnreadable(f"{where}: key token is not base64") from None
        return secrets.decode(value, where)

    def _tell(self, key: tuple[str, str]) -> None:
        for listener in self._listeners:
            listener(*key)

    async def run(self) -> None:
        first = True

        async def relisted(listed: reflectors.Listed) -> None:
            nonlocal first
            fresh = {clients.key_of(o): _version(o) for o in listed.items}
            if not first:
                for key in sorted(fresh.keys() | self._versions.keys()):
                    if fresh.get(key) != self._versions.get(key):
                        self._tell(key)
            self._versions, first = fresh, False

        every = _Secrets(self._api, relisted, self._changed)
        await reflectors.Reflector(
            every, every, what="watching Secrets", clock=self._clock,
            backoff=self._backoff,
            expired=(errors.Expired, errors.TooLarge), describe=_describe).run()

    async def _changed(self, event: reflectors.Event) -> None:
        key = clients.key_of(event.object)
        if event.type == "DELETED":
            self._versions.pop(key, None)
        else:
            self._versions[key] = _version(event.object)
        self._tell(key)


class _Secrets:
    """Every Secret, as the reflector's ``ListWatch`` and ``Sink``."""

    def __init__(self, api: clients.Client,
                 relisted: Callable[[reflectors.Listed], Awaitable[None]],
                 changed: Callable[[reflectors.Event], Awaitable[None]]) -> None:
        self._api = api
        self._relisted = relisted
        self._changed = changed

    async def replace(self, listed: reflectors.Listed) -> None:
        await self._relisted(listed)

    async def apply(self, event: reflectors.Event) -> None:
        await self._changed(event)

    async def list(self) -> reflectors.Listed:
        listed = await self._api.list(clients.SECRETS)
        return reflectors.Listed(listed.items, listed.resource_version)

    async def watch(self, resource_version: str) -> AsyncIterator[reflectors.Event]:
        async for event in self._api.watch(clients.SECRETS, resource_version=resource_version):
            yield reflectors.Event(event.type, event.object)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, errors.ApiError):
        return f"HTTP {exc.code} {exc.message}"
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")


def _version(obj: wire.Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
