"""The local CA and serving certificate: generated once, reused, re-issued when SANs change."""

from __future__ import annotations

import ipaddress
import os
import pathlib
import ssl
import stat

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from certs import authority


def _cert(path: pathlib.Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _sans(path: pathlib.Path) -> x509.SubjectAlternativeName:
    return _cert(path).extensions.get_extension_for_class(x509.SubjectAlternativeName).value


def test_generates_ca_and_serving_certificate(tmp_path: pathlib.Path) -> None:
    files = authority.ensure(tmp_path, ["api.example.test", "10.0.0.7"])
    ca, serving = _cert(files.ca_cert), _cert(files.cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    serving.verify_directly_issued_by(ca)
    assert isinstance(serving.public_key(), ec.EllipticCurvePublicKey)
    assert serving.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]
    sans = _sans(files.cert)
    assert set(sans.get_values_for_type(x509.DNSName)) == {"localhost", "api.example.test"}
    assert set(sans.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
        ipaddress.ip_address("10.0.0.7"),
    }
    not_ca = serving.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert not not_ca.ca


def test_files_are_private(tmp_path: pathlib.Path) -> None:
    files = authority.ensure(tmp_path)
    for path in (files.ca_cert, files.ca_key, files.cert, files.key):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_nothing_planted_at_the_old_temporary_names_is_followed(tmp_path: pathlib.Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    directory = tmp_path / "tls"
    directory.mkdir()
    for name in ("ca.key", "ca.crt", "serving.key", "serving.crt"):
        os.symlink(victim, directory / f".{name}.tmp")
    files = authority.ensure(directory)
    assert victim.read_bytes() == b"precious"
    assert b"PRIVATE KEY" in files.key.read_bytes()


def test_reuses_existing_files(tmp_path: pathlib.Path) -> None:
    first = authority.ensure(tmp_path)
    before = {p: p.read_bytes() for p in (first.ca_cert, first.ca_key, first.cert, first.key)}
    second = authority.ensure(tmp_path)
    assert {p: p.read_bytes() for p in before} == before
    assert second == first


def test_new_san_reissues_serving_certificate_with_same_ca(tmp_path: pathlib.Path) -> None:
    files = authority.ensure(tmp_path)
    ca_before, cert_before = files.ca_cert.read_bytes(), files.cert.read_bytes()
    authority.ensure(tmp_path, ["added.example.test"])
    assert files.ca_cert.read_bytes() == ca_before
    assert files.cert.read_bytes() != cert_before
    assert "added.example.test" in _sans(files.cert).get_values_for_type(x509.DNSName)


def test_python_tls_accepts_the_pair(tmp_path: pathlib.Path) -> None:
    files = authority.ensure(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.cert, files.key)
    client = ssl.create_default_context(cafile=str(files.ca_cert))
    assert client.cert_store_stats()["x509_ca"] == 1
