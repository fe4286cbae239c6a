"""The front-proxy (requestheader) CA and the aggregator's client certificate, and the
``kube-system/extension-apiserver-authentication`` data kube-apiserver publishes for them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from devkit.controlplane.pki import Authority, KeyPair

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"


def _json_list(values: Sequence[str] | None) -> str:
    # Go's json.Marshal of a []string: compact, and "null" for a nil slice.
    return json.dumps(list(values), separators=(",", ":")) if values is not None else "null"


class FrontProxy:
    """``ca`` signs ``client`` (CN ``front-proxy-client``, ClientAuth). ``rotate`` replaces both;
    with ``keep_previous`` the old CA stays in the published bundle (an overlap window)."""

    def __init__(
        self,
        *,
        allowed_names: Sequence[str] | None = ("front-proxy-client",),
        client_name: str = "front-proxy-client",
        username_headers: Sequence[str] = ("X-Remote-User",),
        group_headers: Sequence[str] = ("X-Remote-Group",),
        extra_headers_prefix: Sequence[str] = ("X-Remote-Extra-",),
        uid_headers: Sequence[str] | None = None,
    ) -> None:
        self.allowed_names = allowed_names
        self.client_name = client_name
        self.username_headers = tuple(username_headers)
        self.group_headers = tuple(group_headers)
        self.extra_headers_prefix = tuple(extra_headers_prefix)
        self.uid_headers = None if uid_headers is None else tuple(uid_headers)
        self.ca = Authority("front-proxy-ca")
        self.client = self.ca.client(client_name)
        self._previous: list[Authority] = []

    def issue(self, common_name: str) -> KeyPair:
        """Another client certificate from the same CA (e.g. a CN outside the allowed names)."""
        return self.ca.client(common_name)

    def rotate(self, *, keep_previous: bool = False) -> None:
        self._previous = [self.ca] if keep_previous else []
        self.ca = Authority("front-proxy-ca")
        self.client = self.ca.client(self.client_name)

    @property
    def ca_bundle(self) -> bytes:
        return self.ca.cert_pem + b"".join(old.cert_pem for old in self._previous)

    def configmap_data(self, client_ca_pem: bytes | None) -> dict[str, str]:
        """The keys as kube-apiserver writes them (sorted, JSON arrays as strings)."""
        data: dict[str, str] = {}
        if client_ca_pem is not None:
            data["client-ca-file"] = client_ca_pem.decode()
        data["requestheader-allowed-names"] = _json_list(
            list(self.allowed_names) if self.allowed_names is not None else None
        )
        data["requestheader-client-ca-file"] = self.ca_bundle.decode()
        data["requestheader-extra-headers-prefix"] = _json_list(self.extra_headers_prefix)
        data["requestheader-group-headers"] = _json_list(self.group_headers)
        if self.uid_headers is not None:
            data["requestheader-uid-headers"] = _json_list(self.uid_headers)
        data["requestheader-username-headers"] = _json_list(self.username_headers)
        return data
