"""Certificates for the Service: SANs, usages, validity, key types, CA reuse, the Secret."""

from __future__ import annotations

import base64
import contextlib
import datetime
import pathlib
import ssl

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import authority, cluster

REQUEST = cluster.Request(service="model-manager", namespace="gpustack-system")


def _load(path: pathlib.Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_serving_certificate_names_the_service(tmp_path: pathlib.Path) -> None:
    issued = cluster.generate(tmp_path, REQUEST)
    cert = _load(issued.files.cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {
        "model-manager",
        "model-manager.gpustack-system",
        "model-manager.gpustack-system.svc",
        "model-manager.gpustack-system.svc.cluster.local",
    }
    assert sans.get_values_for_type(x509.IPAddress) == []


def test_usages_and_chain(tmp_path: pathlib.Path) -> None:
    files = cluster.generate(tmp_path, REQUEST).files
    ca, cert = _load(files.ca_cert), _load(files.cert)
    cert.verify_directly_issued_by(ca)
    ca_constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert ca_constraints.ca and ca_constraints.path_length == 0
    ca_usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ca_usage.key_cert_sign and ca_usage.crl_sign
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature and not usage.value.key_cert_sign
    assert not usage.value.key_encipherment  # ECDSA leaves do not encipher keys
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)


def test_validity_windows(tmp_path: pathlib.Path) -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    request = cluster.Request(service="s", namespace="n", days=90, ca_days=200)
    files = cluster.generate(tmp_path, request, now=now).files
    ca, cert = _load(files.ca_cert), _load(files.cert)
    assert cert.not_valid_after_utc == now + datetime.timedelta(days=90)
    assert ca.not_valid_after_utc == now + datetime.timedelta(days=200)
    assert cert.not_valid_before_utc <= now
    # a leaf never outlives its CA
    long_leaf = cluster.Request(service="s", namespace="n", days=5000)
    assert _load(cluster.generate(tmp_path, long_leaf, now=now).files.cert).not_valid_after_utc \
        == ca.not_valid_after_utc


def test_rsa_keys(tmp_path: pathlib.Path) -> None:
    request = cluster.Request(service="s", namespace="n", key_type="rsa")
    files = cluster.generate(tmp_path, request).files
    cert = _load(files.cert)
    public = cert.public_key()
    assert isinstance(public, rsa.RSAPublicKey) and public.key_size == authority.RSA_BITS
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_encipherment
    assert isinstance(authority.load_key(files.key), rsa.RSAPrivateKey)


def test_rerun_reuses_the_ca_and_issues_a_new_serving_pair(tmp_path: pathlib.Path) -> None:
    first = cluster.generate(tmp_path, REQUEST)
    ca_before = first.files.ca_cert.read_bytes()
    cert_before = first.files.cert.read_bytes()
    second = cluster.generate(tmp_path, REQUEST)
    assert first.created_ca and not second.created_ca
    assert second.files.ca_cert.read_bytes() == ca_before
    assert second.files.cert.read_bytes() != cert_before
    _load(second.files.cert).verify_directly_issued_by(_load(second.files.ca_cert))


def test_python_tls_serves_the_pair_for_the_service_name(tmp_path: pathlib.Path) -> None:
    files = cluster.generate(tmp_path, REQUEST).files
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.cert, files.key)
    client = ssl.create_default_context(cafile=str(files.ca_cert))
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(client_in, client_out, server_hostname="model-manager.gpustack-system.svc")
    s = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):  # drive the handshake in memory until both sides finish
        for side in (c, s):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    c.do_handshake()
    assert c.version() is not None


def test_secret_manifest_is_a_tls_secret(tmp_path: pathlib.Path) -> None:
    files = cluster.generate(tmp_path, REQUEST).files
    doc = yaml.safe_load(cluster.secret_manifest("model-manager-tls", "gpustack-system", files))
    assert doc["apiVersion"] == "v1" and doc["kind"] == "Secret"
    assert doc["type"] == "kubernetes.io/tls"
    assert doc["metadata"] == {
        "name": "model-manager-tls",
        "namespace": "gpustack-system",
        "labels": {"app.kubernetes.io/name": "model-manager"},
    }
    assert set(doc["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert base64.b64decode(doc["data"]["tls.crt"]) == files.cert.read_bytes()
    assert base64.b64decode(doc["data"]["tls.key"]) == files.key.read_bytes()
    assert base64.b64decode(doc["data"]["ca.crt"]) == files.ca_cert.read_bytes()
    assert files.ca_key.read_bytes() not in {base64.b64decode(v) for v in doc["data"].values()}


def test_ca_bundle_and_values(tmp_path: pathlib.Path) -> None:
    files = cluster.generate(tmp_path, REQUEST).files
    bundle = cluster.ca_bundle(files.ca_cert.read_bytes())
    assert "\n" not in bundle
    assert base64.b64decode(bundle) == files.ca_cert.read_bytes()
    values = yaml.safe_load(cluster.values_snippet("my-tls", files))
    assert values == {"apiserver": {"tls": {"mode": "secret", "secretName": "my-tls",
                                            "caBundle": bundle}}}  # fmt: skip


def test_unknown_key_type_is_refused() -> None:
    with pytest.raises(ValueError, match="ecdsa, rsa"):
        authority.new_key("dsa")


def test_secret_manifest_is_valid_for_kubernetes(tmp_path: pathlib.Path) -> None:
    files = cluster.generate(tmp_path, REQUEST).files
    doc = yaml.safe_load(cluster.secret_manifest("model-manager-tls", "gpustack-system", files))
    kubernetes_validate.validate(doc, "1.33.0", strict=True)
