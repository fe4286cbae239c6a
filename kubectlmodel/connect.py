"""The caller's cluster, found as kubectl finds it: ``--kubeconfig``, else the first file of
``$KUBECONFIG`` that exists, else ``~/.kube/config``, else the Pod's own service account.

kubectl hands a plugin its arguments as typed (``kubectl model progress x --context c``) and its
environment, so the plugin reads the same flags and variables itself.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping

import kube
from kube import config as kube_config

USER_AGENT = "kubectl-model/0.1.0"


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """Where to go and as whom: the flags kubectl plugins are expected to honour."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    request_timeout: float = 30.0


def cluster(target: Target, env: Mapping[str, str] | None = None) -> kube.ClusterConfig:
    environ = os.environ if env is None else env
    if target.kubeconfig:
        return kube_config.from_kubeconfig(os.path.expanduser(target.kubeconfig), target.context)
    for path in environ.get("KUBECONFIG", "").split(os.pathsep):
        if path and pathlib.Path(path).expanduser().is_file():
            return kube_config.from_kubeconfig(os.path.expanduser(path), target.context)
    default = pathlib.Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config"
    if default.is_file():
        return kube_config.from_kubeconfig(default, target.context)
    try:
        return kube_config.in_cluster(env=environ)
    except kube.ConfigError:
        raise kube.ConfigError(
            "no kubeconfig: pass --kubeconfig, set KUBECONFIG or write ~/.kube/config") from None


def client(target: Target, env: Mapping[str, str] | None = None) -> tuple[kube.Client, str]:
    """The client and the namespace to use (``-n``, else the context's, else ``default``)."""
    found = cluster(target, env)
    namespace = target.namespace or found.namespace or "default"
    return kube.Client(found, timeout=target.request_timeout, user_agent=USER_AGENT), namespace
