"""Standalone mode: prepare a data directory so the server and ``kubectl`` work without a cluster.

First start creates, later starts reuse: a local CA and serving certificate, a static token file
with three identities, the local policy file, and three kubeconfigs:

- ``kubeconfig``: the admin (group ``system:masters``: everything, impersonation included);
- ``worker.kubeconfig``: the worker identity (``--worker-user``), with the worker's role;
- ``plugin.kubeconfig``: a node-plugin identity, the plugin's ServiceAccount name and groups with
  the extras of a Pod-bound token (``pod-name``, ``pod-uid``, ``node-name`` = ``--plugin-node``),
  so the NodeModelStore status guard judges a local plugin exactly as in a cluster.

The token file may hold more plugin identities, one per node (each its own Pod-bound token, as
a cluster issues one per plugin Pod: ``plugin_entry`` makes them; ``bench/fleet`` adds a
thousand). A start keeps them all: only when no plugin identity is bound to ``--plugin-node``
is the first one moved there, and ``plugin.kubeconfig`` carries the one bound to it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import pathlib
import sys
import uuid
from collections.abc import Awaitable, Callable

from apiserver.auth import policy, static, user
from apiserver.flags import config
from apiserver.wiring import kubeconfig
from certs import authority

log = logging.getLogger(__name__)

ADMIN = "admin"


@dataclasses.dataclass(frozen=True, slots=True)
class Prepared:
    settings: config.Settings
    kubeconfig: pathlib.Path
    worker_kubeconfig: pathlib.Path
    plugin_kubeconfig: pathlib.Path


def prepare(settings: config.Settings) -> Prepared:
    """Idempotent, and safe when several processes start on one data directory at once (etcd
    replicas and ``--processes`` share the CA, the serving certificate and the tokens): the first
    one creates the files under an exclusive lock, the others reuse them."""
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    # an empty lock file, yet 0600 like every file the server writes
    lock_path = data_dir / ".prepare.lock"
    with os.fdopen(os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a") as lock:
        os.chmod(lock_path, 0o600)  # one left by an older version
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _prepare(settings)


def _prepare(settings: config.Settings) -> Prepared:
    data_dir = settings.data_dir
    files = authority.ensure(data_dir, settings.tls_sans)
    assert settings.token_auth_file is not None, "standalone settings always name a token file"
    entries = _ensure_tokens(settings.token_auth_file, settings)
    plugin_user = settings.plugin_username
    tokens = {entry.name: entry.token for entry in entries if entry.name != plugin_user}
    tokens[plugin_user] = next(
        entry.token for entry in entries if entry.name == plugin_user
        and entry.extra_map().get(user.NODE_NAME) == (settings.plugin_node,))
    if settings.policy_file is not None:
        policy.ensure_file(settings.policy_file)
    admin = data_dir / "kubeconfig"
    worker = data_dir / "worker.kubeconfig"
    plugin = data_dir / "plugin.kubeconfig"
    # (file, the token's user, the kubeconfig's user name) for the three identities
    for path, token_user, name in ((admin, ADMIN, ADMIN),
                                   (worker, settings.worker_username, "worker"),
                                   (plugin, settings.plugin_username, "node-plugin")):
        kubeconfig.write(path, server=settings.url, ca_file=files.ca_cert,
                         token=tokens[token_user], user=name)
    return Prepared(settings=settings, kubeconfig=admin, worker_kubeconfig=worker,
                    plugin_kubeconfig=plugin)


def greeting(prepared: Prepared) -> str:
    """The two lines a newcomer needs, nothing else."""
    return f"export KUBECONFIG={prepared.kubeconfig.resolve()}\nkubectl get modelartifacts -A\n"


def plugin_extra(node: str, pod_uid: str) -> tuple[tuple[str, str], ...]:
    """The extras of a token bound to the plugin's Pod on ``node`` (as a cluster issues them)."""
    return (
        (user.POD_NAME, f"model-manager-node-{node}"),
        (user.POD_UID, pod_uid),
        (user.NODE_NAME, node),
    )


def plugin_entry(node: str, settings: config.Settings) -> static.Entry:
    """A new node-plugin identity: the plugin's ServiceAccount with a token bound to a Pod on
    ``node``."""
    return static.Entry(static.new_token(), settings.plugin_username, str(uuid.uuid4()),
                        user.service_account_groups(settings.plugin_namespace),
                        plugin_extra(node, str(uuid.uuid4())))


def _ensure_tokens(path: pathlib.Path, settings: config.Settings) -> list[static.Entry]:
    """Keep existing tokens (kubeconfigs in use stay valid); add the admin, the worker or the
    plugin if missing; when no plugin identity is bound to ``--plugin-node``, rebind the first
    one there (the others, other nodes' plugins, stay as they are)."""
    entries = static.parse(path.read_text(), source=str(path)) if path.exists() else []
    names = {entry.name for entry in entries}
    changed = False
    if ADMIN not in names:
        entries.append(static.Entry(static.new_token(), ADMIN, ADMIN, (user.MASTERS,)))
        changed = True
    if settings.worker_username not in names:
        entries.append(static.Entry(static.new_token(), settings.worker_username,
                                    settings.worker_username))
        changed = True
    plugin = settings.plugin_username
    plugins = [index for index, entry in enumerate(entries) if entry.name == plugin]
    node = settings.plugin_node
    if not plugins:
        entries.append(plugin_entry(node, settings))
        changed = True
    elif not any(entries[index].extra_map().get(user.NODE_NAME) == (node,) for index in plugins):
        # bound to another node now: a new Pod there, with a new UID
        first = plugins[0]
        entries[first] = dataclasses.replace(
            entries[first], groups=user.service_account_groups(settings.plugin_namespace),
            extra=plugin_extra(node, str(uuid.uuid4())))
        changed = True
    if changed:
        static.write(path, entries)
    return entries


def greeter(prepared: Prepared) -> Callable[[], Awaitable[None]]:
    """A start-up hook printing the greeting once storage is up (stdout; logs go to stderr)."""

    async def greet() -> None:
        sys.stdout.write(greeting(prepared))
        sys.stdout.flush()

    return greet
