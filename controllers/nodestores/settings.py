"""The settings every node's NodeModelStore ``spec`` is merged from, and how they are checked.

The base is the server's own flags (the hub endpoints, proxy and no-proxy it resolves through)
and the contract's defaults (``openapi.nodestore``, read from the NodeModelStore schema). In a
cluster the settings ConfigMap (``--settings-configmap``) overrides them key by key, each within
the schema's bounds:

=================================== ========================================================
``model-store-high-watermark``      integer, above the low watermark
``model-store-low-watermark``       integer, below the high watermark
``model-store-download-concurrency`` concurrent requests per node
``model-store-download-bandwidth``  bytes per second per node as a quantity (``200Mi``); 0 is
                                    unlimited
``model-artifact-huggingface-endpoint``, ``-modelscope-endpoint``, ``-https-proxy``,
``-no-proxy``                       the same hub settings the resolver reads
``model-artifact-ca-bundle``        the name of a ConfigMap (key ``ca.crt``) in the worker's
                                    namespace; the plugins read it themselves
=================================== ========================================================

A value that fails its check is not applied: the setting keeps its last good value (the base at
first), and the problem is returned so the caller can report it (an Event and the log). Nothing
that fails here ever reaches a ``spec``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from controllers.runtime import events, informer
from hub import config as hub_config
from hub import errors as hub_errors
from openapi import install, names, nodestore, quantity, wire

HIGH, LOW = install.HIGH_WATERMARK, install.LOW_WATERMARK
CONCURRENCY, BANDWIDTH = install.DOWNLOAD_CONCURRENCY, install.DOWNLOAD_BANDWIDTH
HUB_KEYS = {
    install.HUGGING_FACE_ENDPOINT: "huggingface_endpoint",
    install.MODEL_SCOPE_ENDPOINT: "modelscope_endpoint",
    install.HTTPS_PROXY: "https_proxy",
    install.NO_PROXY: "no_proxy",
}
CA_BUNDLE = install.CA_BUNDLE
# The keys that set a spec field with a default or bounds, each with the contract's definition of
# that field: merge checks by it, and the chart's values are checked against it.
CONTRACT: Mapping[str, nodestore.Setting] = {
    HIGH: nodestore.HIGH_PERCENT,
    LOW: nodestore.LOW_PERCENT,
    CONCURRENCY: nodestore.CONCURRENCY,
    BANDWIDTH: nodestore.BYTES_PER_SECOND,
    install.HUGGING_FACE_ENDPOINT: nodestore.HUGGING_FACE_ENDPOINT,
    install.MODEL_SCOPE_ENDPOINT: nodestore.MODEL_SCOPE_ENDPOINT,
}
_INTEGERS = ((HIGH, "high_percent", nodestore.HIGH_PERCENT),
             (LOW, "low_percent", nodestore.LOW_PERCENT),
             (CONCURRENCY, "concurrency", nodestore.CONCURRENCY))
MAX_SHOWN = 64
INVALID = "InvalidSetting"

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class StoreSettings:
    high_percent: int = nodestore.HIGH_PERCENT.default
    low_percent: int = nodestore.LOW_PERCENT.default
    concurrency: int = nodestore.CONCURRENCY.default
    bytes_per_second: int = nodestore.BYTES_PER_SECOND.default
    huggingface_endpoint: str = nodestore.HUGGING_FACE_ENDPOINT.default
    modelscope_endpoint: str = nodestore.MODEL_SCOPE_ENDPOINT.default
    https_proxy: str = ""
    no_proxy: str = ""
    ca_bundle_configmap: str = ""

    def spec(self) -> dict[str, Any]:
        """The part of a NodeModelStore ``spec`` these settings decide."""
        return {
            "watermarks": {"highPercent": self.high_percent, "lowPercent": self.low_percent},
            "download": {"concurrency": self.concurrency, "bytesPerSecond": self.bytes_per_second},
            "hub": {
                "huggingFaceEndpoint": self.huggingface_endpoint,
                "modelScopeEndpoint": self.modelscope_endpoint,
                "httpsProxy": self.https_proxy,
                "noProxy": self.no_proxy,
                "caBundleConfigMap": self.ca_bundle_configmap,
            },
        }


def base_of(hub: hub_config.HubConfig) -> StoreSettings:
    """The settings before any ConfigMap: the server's hub flags and the defaults. A CA bundle
    file of the server's own is not a ConfigMap the plugins can read, so it is not passed on."""
    return StoreSettings(
        huggingface_endpoint=hub.huggingface_endpoint,
        modelscope_endpoint=hub.modelscope_endpoint,
        https_proxy=hub.https_proxy or "",
        no_proxy=hub.no_proxy,
    )


def _integer(key: str, text: str, field: nodestore.Bounded) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{key}: {_shown(text)} is not an integer") from None
    if not field.minimum <= value <= field.maximum:
        raise ValueError(f"{key}: {value} must be from {field.minimum} to {field.maximum}")
    return value


def merge(data: Mapping[str, str], base: StoreSettings,
          last: StoreSettings) -> tuple[StoreSettings, list[str]]:
    """The settings from the ConfigMap's ``data``: a key that is absent (or blank) takes the
    ``base`` value, a valid one its own, and one that fails its check keeps its value from
    ``last`` (the last good merge); the problems come back one sentence per setting."""
    problems: list[str] = []
    merged: dict[str, Any] = {}

    def value(key: str) -> str:
        return str(data.get(key) or "").strip()

    for key, field, contract in _INTEGERS:
        merged[field] = getattr(base, field)
        if value(key):
            try:
                merged[field] = _integer(key, value(key), contract)
            except ValueError as exc:
                problems.append(str(exc))
                merged[field] = getattr(last, field)
    merged["bytes_per_second"] = base.bytes_per_second
    if value(BANDWIDTH):
        try:
            merged["bytes_per_second"] = quantity.to_bytes(value(BANDWIDTH))
        except quantity.QuantityError as exc:
            problems.append(f"{BANDWIDTH}: {exc}")
            merged["bytes_per_second"] = last.bytes_per_second
    if nodestore.watermarks_problem(merged["high_percent"], merged["low_percent"]):
        problems.append(f"{LOW}: {merged['low_percent']} must be below {HIGH} "
                        f"({merged['high_percent']})")
        merged["high_percent"], merged["low_percent"] = last.high_percent, last.low_percent
    hub = {field: value(key) or getattr(base, field) for key, field in HUB_KEYS.items()}
    try:
        hub_config.check(hub_config.HubConfig(
            huggingface_endpoint=hub["huggingface_endpoint"],
            modelscope_endpoint=hub["modelscope_endpoint"],
            https_proxy=hub["https_proxy"] or None, no_proxy=hub["no_proxy"]))
    except hub_errors.HubError as exc:
        message = exc.message
        for key, field in HUB_KEYS.items():
            message = message.replace(field, key)
        problems.append(f"the hub settings: {message}")
        hub = {field: getattr(last, field) for field in HUB_KEYS.values()}
    merged.update(hub)
    bundle = value(CA_BUNDLE)
    merged["ca_bundle_configmap"] = bundle or base.ca_bundle_configmap
    if bundle and not names.is_dns_subdomain(bundle):
        problems.append(f"{CA_BUNDLE}: {_shown(bundle)} is not a ConfigMap name")
        merged["ca_bundle_configmap"] = last.ca_bundle_configmap
    return StoreSettings(**merged), problems


def _shown(text: str) -> str:
    return repr(text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "...")


class ConfigMapSettings:
    """The settings ConfigMap, watched through an informer of the worker's namespace: every
    change is merged at once, what fails is reported (a Warning Event on the ConfigMap and the
    log, once per problem) and not applied, and the handlers are told."""

    def __init__(self, configmaps: informer.Informer, *, namespace: str, name: str,
                 base: StoreSettings, recorder: events.Recorder) -> None:
        self._configmaps = configmaps
        self._namespace = namespace
        self._name = name
        self._base = base
        self._recorder = recorder
        self._value = base
        self._reported: set[str] = set()
        self._handlers: list[Callable[[], None]] = []
        self.problems: list[str] = []
        configmaps.add_handler(self._changed)

    def current(self) -> StoreSettings:
        return self._value

    def add_handler(self, handler: Callable[[], None]) -> None:
        self._handlers.append(handler)

    def _changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        namespace, name = wire.key_of(new or old or {})
        if (namespace, name) == (self._namespace, self._name):
            self.refresh()

    def refresh(self) -> None:
        found = self._configmaps.get(self._namespace, self._name)
        data = {str(k): str(v) for k, v in ((found or {}).get("data") or {}).items()}
        value, problems = merge(data, self._base, self._value)
        self.problems = problems
        for problem in problems:
            if problem in self._reported:
                continue
            log.warning("settings ConfigMap %s/%s: %s; not applied", self._namespace,
                        self._name, problem)
            if found is not None:
                self._recorder.record(found, "Warning", INVALID,
                                      f"{problem}; the setting keeps its last good value")
        self._reported = set(problems)
        if value != self._value:
            self._value = value
            log.info("node store settings changed: %s", value)
            for handler in self._handlers:
                handler()
