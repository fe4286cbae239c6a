"""Which client certificates this server trusts, and for what: the live trust configuration.

Two kinds of client certificates count (docs/auth.md, "Cluster mode"):

- the front proxy's (kube-aggregator's), verified against the requestheader CA, whose CN must be
  in the allowed names; only then are the ``X-Remote-*`` headers believed;
- ordinary client certificates, verified against the client CA (user = CN, groups = O).

Both come from the ``kube-system/extension-apiserver-authentication`` ConfigMap, which
kube-apiserver writes and rotates, unless a flag names them (``--client-ca-file``,
``--requestheader-client-ca-file`` with the ``--requestheader-*`` names), as kube's delegated
servers do. ``Trust`` holds the current configuration; whoever watches the sources calls
``update`` and the TLS layer, subscribed, rebuilds its handshake bundle.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence

from apiserver.auth import x509

log = logging.getLogger(__name__)

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"

CLIENT_CA_KEY = "client-ca-file"
REQUESTHEADER_CA_KEY = "requestheader-client-ca-file"
ALLOWED_NAMES_KEY = "requestheader-allowed-names"
USERNAME_HEADERS_KEY = "requestheader-username-headers"
UID_HEADERS_KEY = "requestheader-uid-headers"
GROUP_HEADERS_KEY = "requestheader-group-headers"
EXTRA_PREFIXES_KEY = "requestheader-extra-headers-prefix"

DEFAULT_USERNAME_HEADERS = ("X-Remote-User",)
DEFAULT_UID_HEADERS = ("X-Remote-Uid",)
DEFAULT_GROUP_HEADERS = ("X-Remote-Group",)
DEFAULT_EXTRA_PREFIXES = ("X-Remote-Extra-",)


class ConfigError(ValueError):
    """A trust source that cannot be used; the message names the key or file, never a value."""


def _lower(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(n.strip().lower() for n in names if n.strip())


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    """The front-proxy configuration: its CA, the CNs allowed and the header names (lower-case)."""

    ca: x509.Bundle
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = _lower(DEFAULT_USERNAME_HEADERS)
    uid_headers: tuple[str, ...] = _lower(DEFAULT_UID_HEADERS)
    group_headers: tuple[str, ...] = _lower(DEFAULT_GROUP_HEADERS)
    extra_prefixes: tuple[str, ...] = _lower(DEFAULT_EXTRA_PREFIXES)

    @classmethod
    def build(cls, ca: x509.Bundle, *, allowed_names: Sequence[str] = (),
              username_headers: Sequence[str] = DEFAULT_USERNAME_HEADERS,
              uid_headers: Sequence[str] = DEFAULT_UID_HEADERS,
              group_headers: Sequence[str] = DEFAULT_GROUP_HEADERS,
              extra_prefixes: Sequence[str] = DEFAULT_EXTRA_PREFIXES) -> RequestHeader:
        if not _lower(username_headers):
            raise ConfigError("requestheader: at least one username header is required")
        return cls(ca=ca, allowed_names=tuple(n for n in allowed_names if n),
                   username_headers=_lower(username_headers), uid_headers=_lower(uid_headers),
                   group_headers=_lower(group_headers), extra_prefixes=_lower(extra_prefixes))


def with_overrides(header: RequestHeader, *, allowed_names: Sequence[str] | None = None,
                   username_headers: Sequence[str] | None = None,
                   uid_headers: Sequence[str] | None = None,
                   group_headers: Sequence[str] | None = None,
                   extra_prefixes: Sequence[str] | None = None) -> RequestHeader:
    """``header`` with each given (not None) part replaced, as the ``--requestheader-*`` flags
    replace the ConfigMap's values."""
    return RequestHeader.build(
        header.ca,
        allowed_names=header.allowed_names if allowed_names is None else allowed_names,
        username_headers=header.username_headers if username_headers is None
        else username_headers,
        uid_headers=header.uid_headers if uid_headers is None else uid_headers,
        group_headers=header.group_headers if group_headers is None else group_headers,
        extra_prefixes=header.extra_prefixes if extra_prefixes is None else extra_prefixes,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    request_header: RequestHeader | None = None
    client_ca: x509.Bundle = dataclasses.field(default_factory=x509.Bundle.empty)

    def handshake_pem(self) -> bytes:
        """Every CA a client certificate may chain to, for the TLS handshake's trust store."""
        parts = [self.client_ca.pem]
        if self.request_header is not None:
            parts.append(self.request_header.ca.pem)
        return b"\n".join(p.strip() + b"\n" for p in parts if p.strip())


def strings(data: Mapping[str, str], key: str) -> tuple[str, ...]:
    """A JSON string array from the ConfigMap (kube's ``deserializeStrings``: null or "" -> ())."""
    raw = data.get(key, "")
    if not raw.strip():
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        raise ConfigError(f"{CONFIGMAP_NAME}: {key} is not a JSON array of strings") from None
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{CONFIGMAP_NAME}: {key} is not a JSON array of strings")
    return tuple(value)


def client_ca_from_configmap(data: Mapping[str, str]) -> x509.Bundle:
    pem = data.get(CLIENT_CA_KEY, "")
    if not pem.strip():
        return x509.Bundle.empty()
    try:
        return x509.Bundle.from_pem(pem.encode(), source=f"{CONFIGMAP_NAME}: {CLIENT_CA_KEY}")
    except x509.BundleError as exc:
        raise ConfigError(str(exc)) from None


def request_header_from_configmap(data: Mapping[str, str]) -> RequestHeader | None:
    """None when the ConfigMap has no requestheader CA (kube writes the other keys only with it)."""
    pem = data.get(REQUESTHEADER_CA_KEY, "")
    if not pem.strip():
        return None
    try:
        ca = x509.Bundle.from_pem(pem.encode(), source=f"{CONFIGMAP_NAME}: {REQUESTHEADER_CA_KEY}")
    except x509.BundleError as exc:
        raise ConfigError(str(exc)) from None
    return RequestHeader.build(
        ca,
        allowed_names=strings(data, ALLOWED_NAMES_KEY),
        username_headers=strings(data, USERNAME_HEADERS_KEY),
        uid_headers=strings(data, UID_HEADERS_KEY),
        group_headers=strings(data, GROUP_HEADERS_KEY),
        extra_prefixes=strings(data, EXTRA_PREFIXES_KEY),
    )


Listener = Callable[[Config], None]


class Trust:
    """The current trust configuration; ``replace`` swaps it and tells the subscribers."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)
        listener(self.config)

    def replace(self, config: Config) -> None:
        self.config = config
        for listener in self._listeners:
            listener(config)

    def set_request_header(self, request_header: RequestHeader | None) -> None:
        self.replace(dataclasses.replace(self.config, request_header=request_header))

    def set_client_ca(self, client_ca: x509.Bundle) -> None:
        self.replace(dataclasses.replace(self.config, client_ca=client_ca))
