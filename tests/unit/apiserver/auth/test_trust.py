"""The trust configuration from extension-apiserver-authentication (the recorded ConfigMap) and
its rotation."""

from __future__ import annotations

import json

import pytest

from apiserver.auth import trust, x509
from tests.unit.apiserver.auth import samples


def test_the_recorded_configmap() -> None:
    data = samples.load("extension-apiserver-authentication")["data"]
    header = trust.request_header_from_configmap(data)
    assert header is not None
    assert header.allowed_names == ("front-proxy-client",)
    assert header.username_headers == ("x-remote-user",)
    assert header.group_headers == ("x-remote-group",)
    assert header.extra_prefixes == ("x-remote-extra-",)
    assert header.uid_headers == ()  # the key is absent: no UID header is read
    assert len(header.ca.anchors) == 1
    client = trust.client_ca_from_configmap(data)
    assert len(client.anchors) == 1 and client.anchors != header.ca.anchors
    pem = trust.Config(request_header=header, client_ca=client).handshake_pem()
    assert pem.count(b"BEGIN CERTIFICATE") == 2


@pytest.mark.parametrize(("value", "expected"), [
    ("", ()), ("null", ()), ("[]", ()), ('["a","b"]', ("a", "b")),
])  # fmt: skip
def test_string_arrays(value: str, expected: tuple[str, ...]) -> None:
    assert trust.strings({"k": value}, "k") == expected


@pytest.mark.parametrize("value", ["a,b", "{}", "[1]", '"x"'])
def test_bad_string_arrays_name_the_key(value: str) -> None:
    with pytest.raises(trust.ConfigError, match="k is not a JSON array"):
        trust.strings({"k": value}, "k")


def test_without_requestheader_ca_there_is_no_front_proxy() -> None:
    assert trust.request_header_from_configmap({"requestheader-allowed-names": "[]"}) is None
    assert not trust.client_ca_from_configmap({})
    with pytest.raises(trust.ConfigError):
        trust.client_ca_from_configmap({"client-ca-file": "not a pem"})


def test_subscribers_see_every_change() -> None:
    data = samples.load("extension-apiserver-authentication")["data"]
    seen: list[trust.Config] = []
    holder = trust.Trust()
    holder.subscribe(seen.append)
    holder.set_client_ca(trust.client_ca_from_configmap(data))
    header = trust.request_header_from_configmap(data)
    holder.set_request_header(header)
    assert len(seen) == 3 and seen[-1].request_header is header and seen[-1].client_ca
    assert not seen[0].client_ca


def test_empty_username_headers_are_refused() -> None:
    with pytest.raises(trust.ConfigError):
        trust.RequestHeader.build(x509.Bundle.empty(), username_headers=())
    data = dict(samples.load("extension-apiserver-authentication")["data"])
    data["requestheader-username-headers"] = json.dumps([])
    with pytest.raises(trust.ConfigError):
        trust.request_header_from_configmap(data)


def test_given_names_replace_the_configmaps() -> None:
    header = trust.request_header_from_configmap(
        samples.load("extension-apiserver-authentication")["data"])
    assert header is not None
    changed = trust.with_overrides(header, allowed_names=("aggregator",),
                                   uid_headers=("X-Remote-Uid",))
    assert changed.allowed_names == ("aggregator",)
    assert changed.uid_headers == ("x-remote-uid",)
    assert changed.username_headers == header.username_headers and changed.ca is header.ca
    assert trust.with_overrides(header) == header
