"""Trust from ``kube-system/extension-apiserver-authentication``, read at start and watched.

kube-apiserver writes the front-proxy CA, its allowed names and header names, and the client CA
there, and rewrites them when they rotate. The server reads the ConfigMap before it listens (no
ConfigMap, no start: it could not tell the aggregator from anyone else), then watches it and
swaps the trust configuration on every change, so a rotated CA or name takes effect without a
restart. Only the parts no flag overrides are taken from it. A value that cannot be used keeps
the previous configuration and is logged; a deleted ConfigMap keeps it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping

from lightkube.resources.core_v1 import ConfigMap

import kube
from apiserver.auth import trust, trustfiles
from apiserver.flags import config

log = logging.getLogger(__name__)

RETRY_SECONDS = 5.0


class StartupError(Exception):
    """The ConfigMap could not be read at start; the message says what to check."""


class AuthConfigMap:
    def __init__(self, client: kube.Client, target: trust.Trust, *, client_ca: bool,
                 request_header: bool, flags: config.RequestHeaderFlags | None = None,
                 retry_seconds: float = RETRY_SECONDS) -> None:
        self.client = client
        self.target = target
        self.flags = flags or config.RequestHeaderFlags()
        self.client_ca = client_ca
        self.request_header = request_header
        self.retry_seconds = retry_seconds
        self.resource_version = ""
        self._task: asyncio.Task[None] | None = None
        self.applied = 0
        """How many versions of the ConfigMap were applied (tests wait on it)."""
        self.changed = asyncio.Event()

    @property
    def needed(self) -> bool:
        return self.client_ca or self.request_header

    async def load(self) -> None:
        try:
            found = await self.client.get(ConfigMap, trust.CONFIGMAP_NAME,
                                          namespace=trust.CONFIGMAP_NAMESPACE)
        except kube.KubeError as exc:
            raise StartupError(
                f"cannot read {trust.CONFIGMAP_NAMESPACE}/{trust.CONFIGMAP_NAME} ({exc.code} "
                f"{exc.reason}): the server needs it to verify the front proxy and client "
                "certificates; grant the Role extension-apiserver-authentication-reader in "
                "kube-system, or give --requestheader-client-ca-file and --client-ca-file"
            ) from None
        try:
            self._apply(found.data or {})
        except trust.ConfigError as exc:
            raise StartupError(str(exc)) from None
        self.resource_version = (found.metadata.resourceVersion if found.metadata else "") or ""

    def _apply(self, data: Mapping[str, str]) -> None:
        current = self.target.config
        if self.request_header:
            header = trust.request_header_from_configmap(data)
            if header is not None:
                header = trustfiles.overrides(header, self.flags)
            current = dataclasses.replace(current, request_header=header)
        if self.client_ca:
            current = dataclasses.replace(current, client_ca=trust.client_ca_from_configmap(data))
        if current != self.target.config:
            self.target.replace(current)
        self.applied += 1
        self.changed.set()

    async def start(self) -> None:
        await self.load()
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        while True:
            try:
                async for kind, obj in self.client.watch(
                        ConfigMap, namespace=trust.CONFIGMAP_NAMESPACE,
                        fields={"metadata.name": trust.CONFIGMAP_NAME},
                        resource_version=self.resource_version or None):
                    if obj.metadata is not None and obj.metadata.resourceVersion:
                        self.resource_version = obj.metadata.resourceVersion
                    if kind == "DELETED":
                        log.warning("%s was deleted; keeping the trust it last held",
                                    trust.CONFIGMAP_NAME)
                        continue
                    self._apply_logged(obj.data or {})
            except kube.Expired:
                await self._relist()
                continue
            except kube.KubeError as exc:
                log.warning("watching %s failed (%s %s); retrying", trust.CONFIGMAP_NAME,
                            exc.code, exc.reason)
            await asyncio.sleep(self.retry_seconds)
            await self._relist()

    async def _relist(self) -> None:
        try:
            await self.load()
        except StartupError as exc:
            log.warning("re-reading the trust configuration failed, keeping the previous: %s",
                        exc)

    def _apply_logged(self, data: Mapping[str, str]) -> None:
        try:
            self._apply(data)
        except trust.ConfigError as exc:
            log.warning("ignoring a change of %s that cannot be used: %s", trust.CONFIGMAP_NAME,
                        exc)
        else:
            log.info("trust configuration updated from %s", trust.CONFIGMAP_NAME)


