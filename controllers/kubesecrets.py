"""Secrets from the Kubernetes API: read with ``get`` when a pass needs the token, watched for
changes (every namespace) so the artifacts naming a changed Secret are checked at once. The
worker may get and watch Secrets but not list them (the chart's RBAC), so the watcher never
lists.

The watcher keeps only each Secret's resourceVersion, never its data; after its watch starts
afresh it reports only the Secrets whose version differs from what it had.
"""

from __future__ import annotations

import base64
import binascii
import logging

from controllers import client as clients
from controllers import errors, queue, secrets
from timing import clock as clocks

log = logging.getLogger(__name__)


class KubeSecrets:
    def __init__(self, api: clients.Client, clock: clocks.Clock,
                 backoff: queue.Backoff = queue.INFORMER_BACKOFF) -> None:
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
        raw = (secret.get("data") or {}).get(secrets.TOKEN_KEY)
        if raw is None:
            text = (secret.get("stringData") or {}).get(secrets.TOKEN_KEY)
            if text is None:
                raise secrets.SecretMissing(f"{where} has no key {secrets.TOKEN_KEY!r}")
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
        """Watch Secrets in every namespace, never listing them (RBAC: get and watch, no list).

        A watch from no version starts with every Secret replayed as ADDED, then the changes;
        the first such replay is the starting state (its ADDED events are not reported; a
        MODIFIED or DELETED is, since a replay has none). After a 410 the
        watch starts afresh and its replay is compared with what was known: a Secret whose
        version differs is reported, and one known before but not replayed by the time the
        first bookmark arrives (kube sends bookmarks after the replay) was deleted meanwhile.
        Any other failure resumes from the last version seen, after a backoff."""
        failures = 0
        version = ""
        first = True
        while True:
            replay: set[tuple[str, str]] | None = set() if not version else None
            try:
                async for event in self._api.watch(clients.SECRETS, resource_version=version):
                    failures = 0
                    version = _version(event.object) or version
                    if event.type == "BOOKMARK":
                        if replay is not None:
                            self._replayed(replay, report=not first)
                            replay, first = None, False
                        continue
                    self._event(event, replay, first=first)
            except errors.Expired:
                version = ""
                continue
            except errors.ApiError as exc:
                failures += 1
                delay = self._backoff.delay(failures)
                log.warning("watching Secrets: HTTP %s %s; again in %.1fs", exc.code,
                            exc.message, delay)
                await clocks.sleep(self._clock, delay)

    def _event(self, event: clients.WatchEvent, replay: set[tuple[str, str]] | None, *,
               first: bool) -> None:
        """A replay is ADDED events only, so MODIFIED and DELETED are always changes; an ADDED
        during the first replay is the starting state, during a later one a change only when
        its version differs from the one known."""
        key = clients.key_of(event.object)
        if event.type == "DELETED":
            self._versions.pop(key, None)
            self._tell(key)
            return
        new = _version(event.object)
        old = self._versions.get(key)
        self._versions[key] = new
        if event.type == "ADDED" and replay is not None:
            replay.add(key)
            if first or old == new:
                return
        self._tell(key)

    def _replayed(self, replay: set[tuple[str, str]], *, report: bool) -> None:
        """The replay ended: what was known and not replayed is gone."""
        for key in sorted(self._versions.keys() - replay):
            del self._versions[key]
            if report:
                self._tell(key)


def _version(obj: clients.Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
