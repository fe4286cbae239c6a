"""A local certificate authority and the serving certificate it signs (ECDSA P-256).

Used by standalone mode: generated once under a directory, reused on later starts. The serving
certificate is re-issued (by the same CA) when it lacks a requested SAN or is close to expiry, so
kubeconfigs that trust the CA keep working.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib
from collections.abc import Sequence

from cryptography import exceptions, x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from durable import disk

DEFAULT_SANS = ("127.0.0.1", "::1", "localhost")
CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclasses.dataclass(frozen=True, slots=True)
class Files:
    """Where the PEM files of a local authority live."""

    ca_cert: pathlib.Path
    ca_key: pathlib.Path
    cert: pathlib.Path
    key: pathlib.Path

    @classmethod
    def under(cls, directory: pathlib.Path) -> Files:
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            cert=directory / "serving.crt",
            key=directory / "serving.key",
        )


def ensure(directory: pathlib.Path, extra_sans: Sequence[str] = ()) -> Files:
    """Create (first time) or reuse the CA and a serving certificate covering the SANs."""
    directory.mkdir(parents=True, exist_ok=True)
    files = Files.under(directory)
    sans = list(dict.fromkeys([*DEFAULT_SANS, *extra_sans]))
    now = _now()
    if files.ca_cert.exists() and files.ca_key.exists():
        ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        ca_key = _load_key(files.ca_key)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _issue_ca(ca_key, now)
        _write(files.ca_key, _key_pem(ca_key))
        _write(files.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    if not _serving_ok(files, ca_cert, sans, now):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue_serving(key, ca_key, ca_cert, sans, now)
        _write(files.key, _key_pem(key))
        _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    return files


def san_entries(sans: Sequence[str]) -> list[x509.GeneralName]:
    """IP addresses become IP SANs, everything else a DNS SAN."""
    entries: list[x509.GeneralName] = []
    for san in sans:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(san)))
        except ValueError:
            entries.append(x509.DNSName(san))
    return entries


def _serving_ok(
    files: Files, ca_cert: x509.Certificate, sans: Sequence[str], now: datetime.datetime
) -> bool:
    if not (files.cert.exists() and files.key.exists()):
        return False
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    if cert.issuer != ca_cert.subject or cert.not_valid_after_utc - now < RENEW_BEFORE:
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
        present = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, exceptions.InvalidSignature):
        return False
    return all(entry in present for entry in san_entries(sans))


def _issue_ca(key: ec.EllipticCurvePrivateKey, now: datetime.datetime) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "model-manager local CA")])
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _issue_serving(
    key: ec.EllipticCurvePrivateKey,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    sans: Sequence[str],
    now: datetime.datetime,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "model-manager apiserver")])
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SERVING_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(san_entries(sans)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _load_key(path: pathlib.Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path}: expected an ECDSA private key")
    return key


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: pathlib.Path, data: bytes) -> None:
    """Write atomically with mode 0600 (keys and certs alike: one rule, no surprises)."""
    disk.write_atomic(path, data, mode=disk.PRIVATE)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
