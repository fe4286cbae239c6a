"""Command line of the conformance suite."""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

import pytest

from conformance import report
from conformance.plugin import Plugin
from conformance.settings import Settings

HERE = pathlib.Path(__file__).resolve().parent

DESCRIPTION = """\
Black-box conformance checks of an installed worker.gpustack.ai/v1 API, through whatever endpoint
the kubeconfig names: a cluster (through kube-apiserver's aggregator) or the standalone server.

It creates ModelArtifacts (and, on a cluster, two namespaces) named after --namespace-prefix and a
random run id, and deletes all of them at the end. It never creates, changes or deletes a
NodeModelStore. Each line of the report names a rule and says pass, fail or skip (with why).
Exit status: 0 when nothing failed, 1 when a check failed, 2 on bad usage.
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", type=pathlib.Path, required=True,
                   help="kubeconfig of an identity that may create and delete ModelArtifacts "
                   "(and namespaces, on a cluster)")  # fmt: skip
    p.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    p.add_argument("--namespace-prefix", default="conformance",
                   help="prefix of the namespaces the run uses (default: conformance)")
    p.add_argument("--tenant-kubeconfig", type=pathlib.Path, default=None,
                   help="kubeconfig of a tenant holding the model-artifact-reader Role in "
                   "--tenant-namespace; without it the tenant checks are skipped")  # fmt: skip
    p.add_argument("--tenant-namespace", default=None,
                   help="the namespace where the tenant's Role is bound (required with "
                   "--tenant-kubeconfig)")  # fmt: skip
    p.add_argument("--get-only-user", default=None, metavar="NAME",
                   help="a user granted only get on modelartifacts in --tenant-namespace, "
                   "impersonated with --kubeconfig (Impersonate-User) to prove get does not "
                   "grant progress; without it that tenant check is skipped")  # fmt: skip
    p.add_argument("--kubectl", default="kubectl",
                   help="kubectl binary for the kubectl checks (default: kubectl on PATH)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds for one request and for every wait (default: 30)")
    p.add_argument("--only", default=None, metavar="EXPR",
                   help="run only checks whose names match this pytest -k expression")
    p.add_argument("--json", type=pathlib.Path, default=None, metavar="FILE",
                   help="also write the results as JSON")
    p.add_argument("--verbose", action="store_true", help="show pytest's own output too")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if not args.kubeconfig.is_file():
        p.error(f"--kubeconfig {args.kubeconfig}: no such file")
    if args.tenant_kubeconfig is not None and not args.tenant_namespace:
        p.error("--tenant-kubeconfig needs --tenant-namespace (where its Role is bound)")
    if args.get_only_user is not None and not args.tenant_namespace:
        p.error("--get-only-user needs --tenant-namespace (where its Role is bound)")
    if args.tenant_kubeconfig is not None and not args.tenant_kubeconfig.is_file():
        p.error(f"--tenant-kubeconfig {args.tenant_kubeconfig}: no such file")
    options = Settings(
        kubeconfig=args.kubeconfig.resolve(),
        context=args.context,
        namespace_prefix=args.namespace_prefix,
        tenant_kubeconfig=args.tenant_kubeconfig.resolve() if args.tenant_kubeconfig else None,
        tenant_namespace=args.tenant_namespace,
        get_only_user=args.get_only_user,
        kubectl=args.kubectl,
        timeout=args.timeout,
    )
    plugin = Plugin(options)
    pytest_args = [str(HERE / "checks"), "-c", str(HERE / "pytest.ini"), "--rootdir", str(HERE),
                   "-p", "no:randomly", "-p", "no:asyncio"]  # fmt: skip
    pytest_args += ["-q"] if args.verbose else ["-p", "no:terminal"]
    if args.only:
        pytest_args += ["-k", args.only]
    code = pytest.main(pytest_args, plugins=[plugin])
    endpoint = plugin.run.admin.server if plugin.run else str(options.kubeconfig)
    sys.stdout.write(report.text(plugin.outcomes, endpoint))
    if args.json is not None:
        args.json.write_text(report.as_json(plugin.outcomes, endpoint))
    failed = any(o.outcome == "fail" for o in plugin.outcomes)
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or not plugin.outcomes:
        sys.stderr.write(f"the suite did not run to the end (pytest exit {int(code)})\n")
        return 1
    return 1 if failed else 0
