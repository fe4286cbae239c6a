"""The settings ConfigMap (``--settings-configmap``, default ``model-manager-settings`` in the
worker's namespace): its ``model-artifact-*`` keys override the hub flags and the revalidation
interval, and changes apply without a restart.

Keys: ``model-artifact-huggingface-endpoint``, ``-modelscope-endpoint``, ``-https-proxy``,
``-no-proxy``, ``-ca-bundle`` (the name of a ConfigMap in the same namespace whose ``ca.crt`` is
trusted; written to a file for the hub client), ``-revalidate-interval`` (a duration, at least
1m). A key that is absent or blank keeps the flag's value; an unusable value is logged and the
last good configuration stays.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import pathlib
from collections.abc import Callable

from controllers import config as settings
from controllers.runtime import informer
from durable import disk
from hub import config as hub_config
from hub import errors as hub_errors
from openapi import install, wire

log = logging.getLogger(__name__)

MIN_INTERVAL = 60.0

Apply = Callable[[hub_config.HubConfig, float], None]


class Invalid(ValueError):
    """A settings value that cannot be used; the message names the key."""


def effective(data: dict[str, str], base: hub_config.HubConfig, interval: float,
              ca_file: str | None) -> tuple[hub_config.HubConfig, float]:
    def value(key: str) -> str:
        return str(data.get(key) or "").strip()

    changes: dict[str, object] = {}
    for key, field in ((install.HUGGING_FACE_ENDPOINT, "huggingface_endpoint"),
                       (install.MODEL_SCOPE_ENDPOINT, "modelscope_endpoint"),
                       (install.HTTPS_PROXY, "https_proxy"), (install.NO_PROXY, "no_proxy")):
        if value(key):
            changes[field] = value(key)
    if value(install.CA_BUNDLE):
        if ca_file is None:
            raise Invalid(f"{install.CA_BUNDLE}: ConfigMap {value(install.CA_BUNDLE)} has no "
                          f"{install.CA_BUNDLE_KEY}")
        changes["ca_bundle"] = ca_file
    config = dataclasses.replace(base, **changes)  # type: ignore[arg-type]
    try:
        hub_config.check(config)
    except hub_errors.HubError as exc:
        raise Invalid(f"the {install.ARTIFACT_PREFIX}* hub settings: {exc.message}") from None
    if value(install.REVALIDATE_INTERVAL):
        try:
            interval = settings.duration(value(install.REVALIDATE_INTERVAL))
        except argparse.ArgumentTypeError as exc:
            raise Invalid(f"{install.REVALIDATE_INTERVAL}: {exc}") from None
        if interval < MIN_INTERVAL:
            raise Invalid(f"{install.REVALIDATE_INTERVAL} must be at least 1m")
    return config, interval


class ClusterSettings:
    def __init__(self, configmaps: informer.Informer, *, namespace: str, name: str,
                 base: hub_config.HubConfig, interval: float, state_dir: pathlib.Path,
                 apply: Apply) -> None:
        self._configmaps = configmaps
        self._namespace = namespace
        self._name = name
        self._base = base
        self._interval = interval
        self._state_dir = state_dir
        self._apply = apply
        self.last_error = ""
        configmaps.add_handler(self._changed)

    def _changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        self.refresh()

    def refresh(self) -> None:
        found = self._configmaps.get(self._namespace, self._name)
        data = {str(k): str(v) for k, v in ((found or {}).get("data") or {}).items()}
        try:
            config, interval = effective(data, self._base, self._interval,
                                         self._ca_file(data.get(install.CA_BUNDLE, "")))
        except Invalid as exc:
            if str(exc) != self.last_error:
                log.warning("settings ConfigMap %s/%s: %s; keeping the last good settings",
                            self._namespace, self._name, exc)
            self.last_error = str(exc)
            return
        self.last_error = ""
        self._apply(config, interval)

    def _ca_file(self, name: str) -> str | None:
        name = name.strip()
        if not name:
            return None
        bundle = self._configmaps.get(self._namespace, name)
        pem = ((bundle or {}).get("data") or {}).get(install.CA_BUNDLE_KEY)
        if not pem:
            return None
        # Named by content: a changed bundle is a changed configuration (a new hub client).
        text = str(pem)
        path = self._state_dir / f"hub-ca-{hashlib.sha256(text.encode()).hexdigest()[:12]}.crt"
        if not path.exists():
            self._state_dir.mkdir(parents=True, exist_ok=True)
            disk.write_atomic(path, text.encode(), mode=0o644)  # a public CA bundle
        return str(path)
