"""Client certificates checked per request: the trust anchor, validity, client-auth usage, the
front proxy's CN and headers (decoded exactly as kube does, from the recorded requests)."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509 as cx509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from apiserver.auth import authenticator, clientcert, requestheader, trust, x509
from apiserver.auth import user as users
from devkit.controlplane import Authority, FrontProxy, KeyPair
from devkit.harness import aggregator
from tests.unit.apiserver.auth import samples


def issued(pair: KeyPair | Authority) -> datetime.datetime:
    """A moment inside ``pair``'s validity, read from the certificate itself (the fixture issues
    from five minutes before its issue time): never the clock at import, which a loaded machine
    leaves minutes behind the certificates issued later in the run."""
    return pair.cert.not_valid_before_utc + datetime.timedelta(minutes=5)


def der(pair: KeyPair | Authority) -> bytes:
    cert = pair.cert
    return cert.public_bytes(serialization.Encoding.DER)


def chain(pair: KeyPair, ca: Authority) -> tuple[bytes, ...]:
    return der(pair), der(ca)


def _trust(proxy: FrontProxy, client_ca: Authority | None = None,
           allowed: tuple[str, ...] = ("front-proxy-client",)) -> trust.Trust:
    header = trust.RequestHeader.build(x509.Bundle.from_pem(proxy.ca.cert_pem),
                                       allowed_names=allowed)
    client = x509.Bundle.from_pem(client_ca.cert_pem) if client_ca else x509.Bundle.empty()
    return trust.Trust(trust.Config(request_header=header, client_ca=client))


def _credentials(peer: tuple[bytes, ...], headers: list[tuple[str, str]]
                 ) -> authenticator.Credentials:
    return authenticator.Credentials.from_asgi(
        [(k.lower().encode(), v.encode()) for k, v in headers], peer)


def test_verify_checks_anchor_validity_and_usage() -> None:
    ca = Authority("ca")
    bundle = x509.Bundle.from_pem(ca.cert_pem)
    client = ca.client("u")
    good = chain(client, ca)
    now = issued(client)
    assert isinstance(x509.verify(good, bundle, now), x509.Peer)
    other = Authority("ca")  # same name, another key: not the same CA
    assert "not signed by a trusted CA" in str(x509.verify(chain(other.client("u"), other),
                                                           bundle, now))
    assert "expired" in str(x509.verify(good, bundle, now + datetime.timedelta(days=400)))
    server_only = ca.client("u", usage=ExtendedKeyUsageOID.SERVER_AUTH)
    assert "client authentication" in str(x509.verify(chain(server_only, ca), bundle,
                                                      issued(server_only)))
    assert x509.verify((), bundle, now) == "no client certificate"
    assert "could not be parsed" in str(x509.verify((b"junk",), bundle, now))


def test_a_reissued_ca_with_the_same_key_still_counts() -> None:
    ca = Authority("ca")
    bundle = x509.Bundle.from_pem(ca.cert_pem)
    peer = x509.peer(chain(ca.client("u"), ca))
    assert peer.anchor in bundle.anchors
    assert peer.common_name == "u"
    assert len(peer.fingerprint) == 64


async def test_front_proxy_believes_headers_only_over_its_certificate() -> None:
    proxy = FrontProxy()
    auth = requestheader.FrontProxy(_trust(proxy))
    headers = [("X-Remote-User", "alice"), ("X-Remote-Group", "tenants")]
    found = await auth.authenticate(_credentials(chain(proxy.client, proxy.ca), headers))
    assert found.user == users.UserInfo("alice", groups=("tenants",))
    assert (await auth.authenticate(_credentials((), headers))) == authenticator.NO_OPINION
    intruder = await auth.authenticate(_credentials(chain(proxy.issue("intruder"), proxy.ca),
                                                    headers))
    assert intruder.user is None and "not an allowed name" in intruder.error
    stranger = Authority("front-proxy-ca")
    refused = await auth.authenticate(_credentials(chain(stranger.client("front-proxy-client"),
                                                         stranger), headers))
    assert refused.user is None and refused.error
    nameless = await auth.authenticate(_credentials(chain(proxy.client, proxy.ca), []))
    assert nameless == authenticator.NO_OPINION  # the next authenticator runs


async def test_any_cn_when_no_names_are_allowed() -> None:
    proxy = FrontProxy()
    auth = requestheader.FrontProxy(_trust(proxy, allowed=()))
    found = await auth.authenticate(_credentials(chain(proxy.issue("anything"), proxy.ca),
                                                 [("X-Remote-User", "bob")]))
    assert found.user is not None and found.user.name == "bob"


async def test_rotation_stops_the_old_ca_at_once() -> None:
    proxy = FrontProxy()
    holder = _trust(proxy)
    auth = requestheader.FrontProxy(holder)
    old = chain(proxy.client, proxy.ca)
    headers = [("X-Remote-User", "alice")]
    assert (await auth.authenticate(_credentials(old, headers))).user is not None
    proxy.rotate()
    holder.set_request_header(trust.RequestHeader.build(x509.Bundle.from_pem(proxy.ca_bundle),
                                                        allowed_names=("front-proxy-client",)))
    assert (await auth.authenticate(_credentials(old, headers))).user is None
    assert (await auth.authenticate(_credentials(chain(proxy.client, proxy.ca),
                                                 headers))).user is not None


@pytest.mark.parametrize("index", range(len(samples.load("aggregator-requests"))))
def test_the_recorded_requests_decode_to_their_callers(index: int) -> None:
    recorded = samples.load("aggregator-requests")[index]
    header = trust.request_header_from_configmap(
        samples.load("extension-apiserver-authentication")["data"])
    assert header is not None
    headers = [(str(k), str(v)) for k, v in recorded["headers"]]
    found = requestheader.identify(header, _credentials((), headers)).user
    assert found is not None
    sent = {k.lower(): [] for k, _ in headers}
    for k, v in headers:
        sent[k.lower()].append(v)
    assert found.name == sent["x-remote-user"][0]
    assert found.groups == tuple(sent.get("x-remote-group", []))
    assert found.uid == ""  # the recorded ConfigMap names no uid header
    if found.name.startswith("system:serviceaccount:"):
        assert found.extra[users.POD_NAME] == ("plugin-a",)
        assert found.extra[users.NODE_NAME] == ("node-a",)
        assert found.extra[users.CREDENTIAL_ID][0].startswith("JTI=")
        assert set(found.extra) == {users.POD_NAME, users.POD_UID, users.NODE_NAME,
                                    users.NODE_UID, users.CREDENTIAL_ID}
    else:
        assert found.extra == {}


def test_extra_keys_are_decoded_like_go() -> None:
    for key in ("authentication.kubernetes.io/pod-name", "scopes", "a%b", "with space", "é"):
        assert requestheader.unescape_key(aggregator.escape_extra_key(key)) == key.lower()
    assert requestheader.unescape_key("bad%zzkey") == "bad%zzkey"  # kept raw, as Go does
    assert requestheader.unescape_key("Mixed%2FCase") == "mixed/case"


async def test_header_rules() -> None:
    proxy = FrontProxy()
    auth = requestheader.FrontProxy(_trust(proxy))
    found = (await auth.authenticate(_credentials(chain(proxy.client, proxy.ca), [
        ("X-Remote-User", "alice"), ("X-Remote-User", "mallory"),
        ("X-Remote-Group", "a,b"), ("X-Remote-Group", ""), ("X-Remote-Group", "c"),
        ("x-remote-extra-Scopes", "s1"), ("X-Remote-Extra-Scopes", "s2"),
        ("X-Remote-Extra-Empty", ""),
    ]))).user
    assert found is not None
    assert found.name == "alice"
    assert found.groups == ("a,b", "c")  # one line per group, never split; empty dropped
    assert found.extra == {"scopes": ("s1", "s2"), "empty": ("",)}


async def test_client_certificate_user_is_cn_and_os() -> None:
    ca = Authority("client-ca")
    holder = trust.Trust(trust.Config(client_ca=x509.Bundle.from_pem(ca.cert_pem)))
    auth = clientcert.ClientCertificate(holder)
    pair = ca.client("carol", ["tenants", "admins"])
    found = (await auth.authenticate(_credentials(chain(pair, ca), []))).user
    assert found is not None
    assert (found.name, found.groups) == ("carol", ("tenants", "admins"))
    digest = cx509.load_pem_x509_certificate(pair.cert_pem).fingerprint(hashes.SHA256()).hex()
    assert found.extra[users.CREDENTIAL_ID] == (f"X509SHA256={digest}",)
    front = FrontProxy()
    refused = await auth.authenticate(_credentials(chain(front.client, front.ca), []))
    assert refused.user is None and refused.error
    assert (await auth.authenticate(_credentials((), []))) == authenticator.NO_OPINION
