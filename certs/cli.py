"""``python -m certs``: certificates for the API server's Service, and their expiry check."""

from __future__ import annotations

import argparse
import datetime
import pathlib
import sys
from collections.abc import Sequence

from cryptography import x509

from certs import authority, cluster, expiry

DESCRIPTION = """\
Certificates for the model-manager API server running behind a Kubernetes Service.

  generate  a CA (created once per --dir, then reused) and a new serving certificate for
            <service>.<namespace>.svc and <service>.<namespace>.svc.<cluster-domain>;
            optionally a kubernetes.io/tls Secret manifest (tls.crt, tls.key, ca.crt) and a
            Helm values file. Prints the APIService caBundle (base64) on stdout.
  check     fail (exit 1) when a certificate is expired, expires within --within-days, lacks
            the Service's SANs or was not signed by the CA.
  bundle    print the caBundle of a directory's CA.

Rotation: run generate again on the same --dir. The CA stays, so the APIService caBundle stays
valid; apply the new Secret and the server picks the new files up without a restart.
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m certs",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="{generate,check,bundle}")

    gen = sub.add_parser("generate", help="issue a serving certificate (and the CA, first time)")
    _service_flags(gen, required=True)
    gen.add_argument("--dir", type=pathlib.Path, required=True,
                     help="directory for ca.crt, ca.key, tls.crt and tls.key (files 0600); an "
                     "existing CA there is reused")  # fmt: skip
    gen.add_argument("--key-type", choices=authority.KEY_TYPES, default="ecdsa",
                     help="ecdsa (P-256, default) or rsa (3072-bit), for new keys")
    gen.add_argument("--days", type=_positive, default=authority.SERVING_DAYS,
                     help=f"serving certificate validity (default: {authority.SERVING_DAYS})")
    gen.add_argument("--ca-days", type=_positive, default=authority.CA_DAYS,
                     help=f"validity of a new CA (default: {authority.CA_DAYS})")
    gen.add_argument("--san", action="append", default=[], metavar="NAME_OR_IP",
                     help="an extra SAN (repeatable)")
    gen.add_argument("--secret-name", default=None,
                     help="name of the Secret in --secret-manifest/--values "
                     "(default: <service>-tls)")  # fmt: skip
    gen.add_argument("--secret-manifest", default=None, metavar="FILE",
                     help="write a kubernetes.io/tls Secret manifest there ('-' = stdout)")
    gen.add_argument("--values", default=None, metavar="FILE",
                     help="write Helm values (apiserver.tls.mode=secret, secretName, caBundle)")

    chk = sub.add_parser("check", help="check a certificate's expiry, SANs and issuer")
    source = chk.add_mutually_exclusive_group(required=True)
    source.add_argument("--cert", type=pathlib.Path, help="a PEM certificate file")
    source.add_argument("--secret-manifest", metavar="FILE",
                        help="a Secret manifest, YAML or JSON ('-' = stdin), e.g. from "
                        "kubectl get secret NAME -o yaml")  # fmt: skip
    chk.add_argument("--ca", type=pathlib.Path, default=None,
                     help="the CA that must have signed it (default: the Secret's ca.crt)")
    chk.add_argument("--within-days", type=_positive, default=expiry.DEFAULT_WITHIN_DAYS,
                     help=f"fail when it expires within this many days "
                     f"(default: {expiry.DEFAULT_WITHIN_DAYS})")  # fmt: skip
    _service_flags(chk, required=False)

    bun = sub.add_parser("bundle", help="print the APIService caBundle of a directory's CA")
    bun.add_argument("--dir", type=pathlib.Path, required=True, help="the generate directory")
    return p


def _service_flags(p: argparse.ArgumentParser, *, required: bool) -> None:
    note = "" if required else " (with --namespace: require its SANs)"
    p.add_argument("--service", required=required, help=f"the Service's name{note}")
    p.add_argument("--namespace", required=required, help="the Service's namespace")
    p.add_argument("--cluster-domain", default=cluster.CLUSTER_DOMAIN,
                   help=f"the cluster's DNS domain (default: {cluster.CLUSTER_DOMAIN})")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "generate":
        return _generate(args)
    if args.command == "check":
        return _check(args)
    sys.stdout.write(cluster.ca_bundle(cluster.secret_files(args.dir).ca_cert.read_bytes()) + "\n")
    return 0


def _generate(args: argparse.Namespace) -> int:
    request = cluster.Request(
        service=args.service,
        namespace=args.namespace,
        key_type=args.key_type,
        days=args.days,
        ca_days=args.ca_days,
        cluster_domain=args.cluster_domain,
        extra_sans=tuple(args.san),
    )
    issued = cluster.generate(args.dir, request)
    files = issued.files
    secret_name = args.secret_name or f"{args.service}-tls"
    ca_note = "created a new CA" if issued.created_ca else "reused the CA"
    sys.stderr.write(
        f"{ca_note} in {files.ca_cert}; issued {files.cert} for {', '.join(request.sans())}, "
        f"valid until {issued.cert.not_valid_after_utc:%Y-%m-%d}\n"
    )
    if args.secret_manifest:
        manifest = cluster.secret_manifest(secret_name, args.namespace, files)
        _emit(args.secret_manifest, manifest)
    if args.values:
        _emit(args.values, cluster.values_snippet(secret_name, files))
    if args.secret_manifest != "-":
        sys.stdout.write(cluster.ca_bundle(files.ca_cert.read_bytes()) + "\n")
    return 0


def _emit(target: str, text: str) -> None:
    if target == "-":
        sys.stdout.write(text)
    else:
        authority.write(pathlib.Path(target), text.encode())


def _check(args: argparse.Namespace) -> int:
    ca: x509.Certificate | None = None
    try:
        if args.cert is not None:
            cert = x509.load_pem_x509_certificate(args.cert.read_bytes())
        else:
            text = sys.stdin.read() if args.secret_manifest == "-" else pathlib.Path(
                args.secret_manifest).read_text()  # fmt: skip
            cert, ca = expiry.certificates_from_manifest(text)
        if args.ca is not None:
            ca = x509.load_pem_x509_certificate(args.ca.read_bytes())
    except (OSError, ValueError) as err:
        sys.stderr.write(f"cannot read the certificate: {err}\n")
        return 2
    names: list[str] = []
    if args.service and args.namespace:
        names = cluster.service_sans(args.service, args.namespace, args.cluster_domain)[2:]
    result = expiry.check(
        cert,
        authority.utc_now(),
        within=datetime.timedelta(days=args.within_days),
        dns_names=names,
        ca=ca,
    )
    (sys.stdout if result.ok else sys.stderr).write(result.summary() + "\n")
    return 0 if result.ok else 1
