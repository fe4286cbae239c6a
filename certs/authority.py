"""A certificate authority and the serving certificates it signs (ECDSA P-256 or RSA).

``ensure`` is standalone mode's entry: generated once under a directory, reused on later starts.
The serving certificate is re-issued (by the same CA) when it lacks a requested SAN or is close
to expiry, so kubeconfigs that trust the CA keep working. ``new_key``, ``issue_ca`` and
``issue_serving`` are the building blocks ``certs.cluster`` uses for an in-cluster Service.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib
from collections.abc import Sequence

from cryptography import exceptions, x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from durable import disk

DEFAULT_SANS = ("127.0.0.1", "::1", "localhost")
CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)

RSA_BITS = 3072
KEY_TYPES = ("ecdsa", "rsa")
"""``ecdsa`` is P-256 (the default: small, fast, accepted by Go and OpenSSL); ``rsa`` is 3072-bit
for environments whose policy still asks for RSA."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclasses.dataclass(frozen=True, slots=True)
class Files:
    """Where the PEM files of a local authority live."""

    ca_cert: pathlib.Path
    ca_key: pathlib.Path
    cert: pathlib.Path
    key: pathlib.Path

    @classmethod
    def under(cls, directory: pathlib.Path, *, cert: str = "serving.crt",
              key: str = "serving.key") -> Files:
        """The CA as ``ca.crt``/``ca.key`` and the serving pair as ``cert``/``key`` (a
        Service's certificates use the Secret key names, ``certs.cluster.secret_files``)."""
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            cert=directory / cert,
            key=directory / key,
        )


def ensure(directory: pathlib.Path, extra_sans: Sequence[str] = ()) -> Files:
    """Create (first time) or reuse the CA and a serving certificate covering the SANs."""
    directory.mkdir(parents=True, exist_ok=True)
    files = Files.under(directory)
    sans = list(dict.fromkeys([*DEFAULT_SANS, *extra_sans]))
    now = utc_now()
    if files.ca_cert.exists() and files.ca_key.exists():
        ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        ca_key = load_key(files.ca_key)
    else:
        ca_key = new_key("ecdsa")
        ca_cert = issue_ca(ca_key, now)
        write(files.ca_key, key_pem(ca_key))
        write(files.ca_cert, cert_pem(ca_cert))
    if not _serving_ok(files, ca_cert, sans, now):
        key = new_key("ecdsa")
        cert = issue_serving(key, ca_key, ca_cert, sans, now)
        write(files.key, key_pem(key))
        write(files.cert, cert_pem(cert))
    return files


def new_key(key_type: str) -> PrivateKey:
    """A fresh private key: ``ecdsa`` (P-256) or ``rsa`` (RSA_BITS)."""
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    raise ValueError(f"key type must be one of {', '.join(KEY_TYPES)}, not {key_type[:20]!r}")


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


def issue_ca(
    key: PrivateKey,
    now: datetime.datetime,
    *,
    common_name: str = "model-manager local CA",
    days: int = CA_DAYS,
) -> x509.Certificate:
    """A self-signed CA that may sign leaf certificates only (path length 0)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def issue_serving(
    key: PrivateKey,
    ca_key: PrivateKey,
    ca_cert: x509.Certificate,
    sans: Sequence[str],
    now: datetime.datetime,
    *,
    common_name: str = "model-manager apiserver",
    days: int = SERVING_DAYS,
) -> x509.Certificate:
    """A server-auth leaf for ``sans`` signed by the CA (never beyond the CA's own expiry)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    not_after = min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc)
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            _key_usage(signs_certificates=False, rsa_leaf=isinstance(key, rsa.RSAPrivateKey)),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(san_entries(sans)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )


def _key_usage(*, signs_certificates: bool, rsa_leaf: bool = False) -> x509.KeyUsage:
    """RSA leaves also get keyEncipherment (TLS 1.2 RSA key exchange); ECDSA leaves do not."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=rsa_leaf,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def load_key(path: pathlib.Path) -> PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"{path}: expected an ECDSA or RSA private key")
    return key


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write(path: pathlib.Path, data: bytes) -> None:
    """Write atomically with mode 0600 (keys and certs alike: one rule, no surprises)."""
    disk.write_atomic(path, data, mode=disk.PRIVATE)


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
