"""Certificates for the API server behind a Kubernetes Service, and the manifests that carry them.

The aggregator dials ``https://<svc>.<ns>.svc`` and checks the serving certificate against the
APIService's ``caBundle``, so the serving certificate needs that DNS SAN (Go ignores the CN).
A directory holds the CA (``ca.crt``, ``ca.key``) and the serving pair (``tls.crt``, ``tls.key``);
running ``generate`` again on it re-issues the serving pair with the same CA, which is rotation
without touching the APIService.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import pathlib
from collections.abc import Sequence

import yaml
from cryptography import x509

from certs import authority
from openapi import keys

CLUSTER_DOMAIN = "cluster.local"
SECRET_TYPE = "kubernetes.io/tls"


Files = authority.Files


def secret_files(directory: pathlib.Path) -> Files:
    """The PEM files of one Service's certificates in a directory, under the Secret's key names
    (``tls.crt``, ``tls.key``)."""
    return Files.under(directory, cert="tls.crt", key="tls.key")


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """What to issue: the Service, its namespace and the key and validity choices."""

    service: str
    namespace: str
    key_type: str = "ecdsa"
    days: int = authority.SERVING_DAYS
    ca_days: int = authority.CA_DAYS
    cluster_domain: str = CLUSTER_DOMAIN
    extra_sans: tuple[str, ...] = ()

    def sans(self) -> list[str]:
        return service_sans(self.service, self.namespace, self.cluster_domain, self.extra_sans)


@dataclasses.dataclass(frozen=True, slots=True)
class Issued:
    files: Files
    created_ca: bool
    """False when the directory's CA was reused (the APIService's caBundle stays valid)."""
    cert: x509.Certificate


def service_sans(
    service: str, namespace: str, cluster_domain: str = CLUSTER_DOMAIN, extra: Sequence[str] = ()
) -> list[str]:
    """Every name a client inside the cluster may use for the Service, most specific last."""
    names = [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{cluster_domain}",
        *extra,
    ]
    return list(dict.fromkeys(names))


def generate(
    directory: pathlib.Path, request: Request, now: datetime.datetime | None = None
) -> Issued:
    """Create the CA unless the directory has one, then issue a new serving pair under it."""
    now = now or authority.utc_now()
    directory.mkdir(parents=True, exist_ok=True)
    files = secret_files(directory)
    created = not (files.ca_cert.exists() and files.ca_key.exists())
    if created:
        ca_key = authority.new_key(request.key_type)
        ca_cert = authority.issue_ca(
            ca_key, now, common_name=f"{request.service}.{request.namespace} CA",
            days=request.ca_days,
        )  # fmt: skip
        authority.write(files.ca_key, authority.key_pem(ca_key))
        authority.write(files.ca_cert, authority.cert_pem(ca_cert))
    else:
        ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        ca_key = authority.load_key(files.ca_key)
    key = authority.new_key(request.key_type)
    cert = authority.issue_serving(
        key, ca_key, ca_cert, request.sans(), now,
        common_name=f"{request.service}.{request.namespace}.svc", days=request.days,
    )  # fmt: skip
    authority.write(files.key, authority.key_pem(key))
    authority.write(files.cert, authority.cert_pem(cert))
    return Issued(files=files, created_ca=created, cert=cert)


def ca_bundle(ca_pem: bytes) -> str:
    """The APIService ``spec.caBundle`` value: the PEM bundle, base64 on one line."""
    return base64.b64encode(ca_pem).decode("ascii")


def secret_manifest(name: str, namespace: str, files: Files) -> str:
    """A ``kubernetes.io/tls`` Secret with ``tls.crt``, ``tls.key`` and ``ca.crt`` (no CA key)."""

    def encoded(path: pathlib.Path) -> str:
        return base64.b64encode(path.read_bytes()).decode("ascii")

    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {keys.NAME: keys.APP},
        },
        "type": SECRET_TYPE,
        "data": {
            "tls.crt": encoded(files.cert),
            "tls.key": encoded(files.key),
            "ca.crt": encoded(files.ca_cert),
        },
    }
    return yaml.safe_dump(manifest, sort_keys=False)


def values_snippet(secret_name: str, files: Files) -> str:
    """Helm values pointing the chart at the Secret and the CA that signed it."""
    values = {
        "apiserver": {
            "tls": {
                "mode": "secret",
                "secretName": secret_name,
                "caBundle": ca_bundle(files.ca_cert.read_bytes()),
            }
        }
    }
    return yaml.safe_dump(values, sort_keys=False)
