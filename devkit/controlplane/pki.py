"""Throwaway certificate authorities for the fixture control plane (ECDSA P-256, in memory).

One ``Authority`` per role, as a real cluster has them: the cluster CA that signs the serving
certificate, the client CA whose certificates authenticate callers (CN = user, O = groups), and
the front-proxy (requestheader) CA that signs the aggregator's ``front-proxy-client``.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import pathlib
import ssl
import tempfile
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def write(self, directory: pathlib.Path, stem: str) -> tuple[pathlib.Path, pathlib.Path]:
        """``<stem>.crt`` and ``<stem>.key`` under ``directory`` (0600)."""
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        for path, data in ((cert, self.cert_pem), (key, self.key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        return cert, key

    def load_into(self, context: ssl.SSLContext) -> None:
        """``context.load_cert_chain`` from memory (through a private temporary directory)."""
        with tempfile.TemporaryDirectory(prefix="pki-") as scratch:
            cert, key = self.write(pathlib.Path(scratch), "pair")
            context.load_cert_chain(cert, key)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _sans(names: Sequence[str]) -> list[x509.GeneralName]:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return entries


class Authority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, common_name: str) -> None:
        self.common_name = common_name
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        public = self._key.public_key()
        now = _now()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(ca=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def write_ca(self, path: pathlib.Path) -> pathlib.Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.cert_pem)
        return path

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: Sequence[str] = (),
        days: int = 30,
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        ski = self.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
            )
        )
        if sans:
            san = x509.SubjectAlternativeName(_sans(sans))
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))

    def serving(self, sans: Sequence[str] = ("127.0.0.1", "localhost")) -> KeyPair:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(
        self,
        common_name: str,
        organizations: Sequence[str] = (),
        *,
        usage: x509.ObjectIdentifier = ExtendedKeyUsageOID.CLIENT_AUTH,
    ) -> KeyPair:
        """A client certificate: CN = user name, one O per group (kube's x509 mapping)."""
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        return self._issue(x509.Name(attributes), usage)


def identity_of(der: bytes) -> tuple[str, tuple[str, ...]]:
    """(CN, O values) of a DER certificate."""
    cert = x509.load_der_x509_certificate(der)
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    name = str(cns[0].value) if cns else ""
    return name, tuple(str(o.value) for o in orgs)


def sha256_hex(der: bytes) -> str:
    digest = hashes.Hash(hashes.SHA256())
    digest.update(der)
    return digest.finalize().hex()
