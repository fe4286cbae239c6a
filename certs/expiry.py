"""Checks on a serving certificate: expiry (with a margin), the SANs it must carry, its issuer."""

from __future__ import annotations

import base64
import dataclasses
import datetime
from collections.abc import Sequence

import yaml
from cryptography import exceptions, x509

DEFAULT_WITHIN_DAYS = 30
MAX_MANIFEST_BYTES = 1 << 20


class ManifestError(ValueError):
    """The input is not a Secret manifest holding a certificate."""


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    subject: str
    not_after: datetime.datetime
    days_left: float
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        when = self.not_after.strftime("%Y-%m-%d %H:%M:%SZ")
        head = f"{self.subject}: valid until {when} ({self.days_left:.0f} days left)"
        return "\n".join([head, *(f"  problem: {p}" for p in self.problems)])


def check(
    cert: x509.Certificate,
    now: datetime.datetime,
    *,
    within: datetime.timedelta = datetime.timedelta(days=DEFAULT_WITHIN_DAYS),
    dns_names: Sequence[str] = (),
    ca: x509.Certificate | None = None,
) -> Result:
    """Everything wrong with ``cert`` for serving now and for the next ``within``."""
    problems: list[str] = []
    not_after = cert.not_valid_after_utc
    left = not_after - now
    if cert.not_valid_before_utc > now:
        problems.append("not valid yet (check the clocks)")
    if left <= datetime.timedelta(0):
        problems.append("expired")
    elif left <= within:
        problems.append(
            f"expires within {within.days} days: rotate it (python -m certs generate on the "
            "same directory issues a new one under the same CA)"
        )
    present = _dns_sans(cert)
    missing = [name for name in dns_names if name not in present]
    if missing:
        problems.append(f"missing DNS SANs: {', '.join(missing)}")
    if ca is not None:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, exceptions.InvalidSignature):
            problems.append("not signed by the given CA")
        if ca.not_valid_after_utc - now <= within:
            problems.append(f"the CA expires within {within.days} days")
    return Result(
        subject=cert.subject.rfc4514_string() or "(no subject)",
        not_after=not_after,
        days_left=left.total_seconds() / 86400,
        problems=tuple(problems),
    )


def _dns_sans(cert: x509.Certificate) -> set[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return set(ext.value.get_values_for_type(x509.DNSName))


def certificates_from_manifest(text: str) -> tuple[x509.Certificate, x509.Certificate | None]:
    """``tls.crt`` (and ``ca.crt`` when present) from a Secret manifest (YAML or JSON)."""
    if len(text) > MAX_MANIFEST_BYTES:
        raise ManifestError("the manifest is larger than 1 MiB")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ManifestError(f"not YAML: {err.__class__.__name__}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "Secret":
        raise ManifestError("not a Secret manifest (kind must be Secret)")
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("tls.crt"), str):
        raise ManifestError("the Secret has no data.tls.crt")
    cert = _decode(data["tls.crt"], "tls.crt")
    ca = _decode(data["ca.crt"], "ca.crt") if isinstance(data.get("ca.crt"), str) else None
    return cert, ca


def _decode(value: str, key: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(base64.b64decode(value, validate=True))
    except ValueError:
        raise ManifestError(f"data.{key} is not a base64 PEM certificate") from None
