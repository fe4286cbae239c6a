"""Client certificates: trust bundles and the per-request checks of a TLS-verified peer chain.

The TLS layer (``apiserver.serving``) verifies the peer chain during the handshake against one
bundle holding every CA this server trusts for clients (the requestheader CA and the client CA),
and puts the verified chain, leaf first, in the ASGI scope. Which CA a chain ends in decides what
it may do, so each authenticator checks, per request and against its own current bundle:

- the chain's trust anchor is one of the bundle's CAs (same subject and public key, as Go's
  root pool matches them), so a CA removed at rotation stops counting at once, even on a
  connection opened before;
- every certificate of the chain is within its validity period now;
- every certificate carrying an extended key usage allows client authentication (Go's
  ``x509.VerifyOptions{KeyUsages: [ClientAuth]}``).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import itertools
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_generations = itertools.count(1)
_MAX_PARSED = 1024


class BundleError(ValueError):
    """A CA bundle that holds no usable certificate."""


def _anchor_key(cert: x509.Certificate) -> tuple[bytes, bytes]:
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.subject.public_bytes(), spki


@dataclasses.dataclass(frozen=True, slots=True)
class Bundle:
    """A set of trusted CAs, from a PEM bundle; ``generation`` changes with every new bundle."""

    pem: bytes
    anchors: frozenset[tuple[bytes, bytes]]
    generation: int

    @classmethod
    def from_pem(cls, pem: bytes, *, source: str = "CA bundle") -> Bundle:
        try:
            certs = x509.load_pem_x509_certificates(pem)
        except ValueError as exc:
            raise BundleError(f"{source}: no PEM certificate could be read ({exc})") from None
        return cls(pem=pem, anchors=frozenset(_anchor_key(c) for c in certs),
                   generation=next(_generations))

    @classmethod
    def empty(cls) -> Bundle:
        return cls(pem=b"", anchors=frozenset(), generation=0)

    def __bool__(self) -> bool:
        return bool(self.anchors)


@dataclasses.dataclass(frozen=True, slots=True)
class Peer:
    """A parsed peer chain, with what the per-request checks need precomputed."""

    leaf: x509.Certificate
    anchor: tuple[bytes, bytes]
    not_before: datetime.datetime
    not_after: datetime.datetime
    client_auth: bool
    fingerprint: str
    """Hex SHA-256 of the leaf's DER (kube's ``X509SHA256=`` credential id)."""
    common_name: str
    organizations: tuple[str, ...]


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


_parsed: dict[tuple[bytes, ...], Peer] = {}


def peer(chain: Sequence[bytes]) -> Peer:
    """The parsed chain (leaf first), memoized: a connection's chain is parsed once."""
    key = chain if isinstance(chain, tuple) else tuple(chain)
    found = _parsed.get(key)
    if found is not None:
        return found
    certs = [x509.load_der_x509_certificate(der) for der in key]
    allows = all(_allows_client_auth(c) for c in certs)
    result = Peer(
        leaf=certs[0],
        anchor=_anchor_key(certs[-1]),
        not_before=max(c.not_valid_before_utc for c in certs),
        not_after=min(c.not_valid_after_utc for c in certs),
        client_auth=allows,
        fingerprint=hashlib.sha256(key[0]).hexdigest(),
        common_name=next((_text(a.value) for a in certs[0].subject.get_attributes_for_oid(
            NameOID.COMMON_NAME)), ""),
        organizations=tuple(_text(a.value) for a in certs[0].subject.get_attributes_for_oid(
            NameOID.ORGANIZATION_NAME)),
    )
    if len(_parsed) >= _MAX_PARSED:
        _parsed.clear()  # rare: more distinct client chains than connections usually are
    _parsed[key] = result
    return result


def _allows_client_auth(cert: x509.Certificate) -> bool:
    try:
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return ExtendedKeyUsageOID.CLIENT_AUTH in usage or \
        ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usage


def verify(chain: Sequence[bytes], bundle: Bundle, now: datetime.datetime) -> Peer | str:
    """The peer when ``chain`` ends in ``bundle`` and is usable for client auth now, else why
    not (a short reason for the log; it names no secret)."""
    if not chain:
        return "no client certificate"
    try:
        found = peer(chain)
    except ValueError:
        return "the client certificate could not be parsed"
    if found.anchor not in bundle.anchors:
        return "the client certificate is not signed by a trusted CA"
    if not found.not_before <= now <= found.not_after:
        return "the client certificate is expired or not yet valid"
    if not found.client_auth:
        return "the client certificate is not valid for client authentication"
    return found
