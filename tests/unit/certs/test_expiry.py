"""The expiry check: margins, SANs, issuer, and reading a Secret manifest."""

from __future__ import annotations

import datetime
import pathlib

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs import cluster, expiry

NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
REQUEST = cluster.Request(service="mm", namespace="ns", days=100)


def _issue(tmp_path: pathlib.Path, now: datetime.datetime = NOW) -> cluster.Issued:
    return cluster.generate(tmp_path, REQUEST, now=now)


def test_fresh_certificate_passes(tmp_path: pathlib.Path) -> None:
    issued = _issue(tmp_path)
    ca = x509.load_pem_x509_certificate(issued.files.ca_cert.read_bytes())
    result = expiry.check(issued.cert, NOW, dns_names=["mm.ns.svc"], ca=ca)
    assert result.ok, result.problems
    assert round(result.days_left) == 100
    assert "100 days left" in result.summary()


def test_near_expiry_fails_with_a_rotation_hint(tmp_path: pathlib.Path) -> None:
    cert = _issue(tmp_path).cert
    result = expiry.check(cert, NOW + 80 * DAY, within=30 * DAY)
    assert not result.ok
    assert "expires within 30 days" in result.problems[0]
    assert "python -m certs generate" in result.problems[0]
    assert expiry.check(cert, NOW + 60 * DAY, within=30 * DAY).ok


def test_expired_and_not_yet_valid(tmp_path: pathlib.Path) -> None:
    cert = _issue(tmp_path).cert
    assert expiry.check(cert, NOW + 101 * DAY).problems == ("expired",)
    assert "not valid yet" in expiry.check(cert, NOW - DAY).problems[0]


def test_missing_san_and_wrong_ca(tmp_path: pathlib.Path) -> None:
    cert = _issue(tmp_path / "a").cert
    other = _issue(tmp_path / "b").files.ca_cert
    other_ca = x509.load_pem_x509_certificate(other.read_bytes())
    problems = expiry.check(cert, NOW, dns_names=["other.ns.svc"], ca=other_ca).problems
    assert "missing DNS SANs: other.ns.svc" in problems
    assert "not signed by the given CA" in problems


def test_reads_a_secret_manifest(tmp_path: pathlib.Path) -> None:
    files = _issue(tmp_path).files
    cert, ca = expiry.certificates_from_manifest(cluster.secret_manifest("s", "ns", files))
    assert cert.public_bytes(serialization.Encoding.PEM) == files.cert.read_bytes()
    assert ca is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: ConfigMap\n", "not a Secret"),
        ("kind: Secret\ndata: {}\n", "no data.tls.crt"),
        ("kind: Secret\ndata:\n  tls.crt: '!!notbase64'\n", "not a base64 PEM"),
        ("{[", "not YAML"),
        ("x" * (expiry.MAX_MANIFEST_BYTES + 1), "larger than 1 MiB"),
    ],
)
def test_bad_manifests_are_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(expiry.ManifestError, match=message):
        expiry.certificates_from_manifest(text)
