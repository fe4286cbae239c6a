"""Standalone mode: prepare a data directory so the server and ``kubectl`` work without a cluster.

First start creates, later starts reuse: a local CA and serving certificate, a static token file
with an admin token (group ``system:masters``) and a worker token, and two kubeconfigs
(``kubeconfig`` for the admin, ``worker.kubeconfig`` for the worker identity).
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import pathlib
import sys
from collections.abc import Awaitable, Callable

from apiserver import config, errors, kubeconfig
from apiserver.auth import static, user
from apiserver.registry import build
from certs import authority
from openapi import resources

log = logging.getLogger(__name__)

ADMIN = "admin"


@dataclasses.dataclass(frozen=True, slots=True)
class Prepared:
    settings: config.Settings
    kubeconfig: pathlib.Path
    worker_kubeconfig: pathlib.Path


def prepare(settings: config.Settings) -> Prepared:
    """Idempotent, and safe when several processes start on one data directory at once (etcd
    replicas and ``--workers`` share the CA, the serving certificate and the tokens): the first
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
    entries = _ensure_tokens(settings.token_auth_file, settings.worker_username)
    tokens = {entry.name: entry.token for entry in entries}
    admin = data_dir / "kubeconfig"
    worker = data_dir / "worker.kubeconfig"
    kubeconfig.write(
        admin, server=settings.url, ca_file=files.ca_cert, token=tokens[ADMIN], user=ADMIN
    )
    kubeconfig.write(
        worker,
        server=settings.url,
        ca_file=files.ca_cert,
        token=tokens[settings.worker_username],
        user="worker",
    )
    return Prepared(settings=settings, kubeconfig=admin, worker_kubeconfig=worker)


def greeting(prepared: Prepared) -> str:
    """The two lines a newcomer needs, nothing else."""
    return f"export KUBECONFIG={prepared.kubeconfig.resolve()}\nkubectl get modelartifacts -A\n"


def _ensure_tokens(path: pathlib.Path, worker_username: str) -> list[static.Entry]:
    """Keep existing tokens (kubeconfigs in use stay valid); add the admin or worker if missing."""
    entries = static.parse(path.read_text(), source=str(path)) if path.exists() else []
    names = {entry.name for entry in entries}
    added = False
    if ADMIN not in names:
        entries.append(static.Entry(static.new_token(), ADMIN, ADMIN, (user.MASTERS,)))
        added = True
    if worker_username not in names:
        entries.append(static.Entry(static.new_token(), worker_username, worker_username))
        added = True
    if added:
        static.write(path, entries)
    return entries


def greeter(prepared: Prepared) -> Callable[[], Awaitable[None]]:
    """A start-up hook printing the greeting once storage is up (stdout; logs go to stderr)."""

    async def greet() -> None:
        sys.stdout.write(greeting(prepared))
        sys.stdout.flush()

    return greet


def seeder(registry: build.Registry, name: str) -> Callable[[], Awaitable[None]]:
    """A start-up hook creating NodeModelStore ``name`` (spec defaulted) unless it exists.

    Clients cannot create NodeModelStores over HTTP (node plugins will, through their status
    path, in a later issue), so this is how a standalone server gets one to show and delete.
    """

    async def seed() -> None:
        obj = {
            "apiVersion": resources.GROUP_VERSION,
            "kind": resources.NODE_MODEL_STORE.kind,
            "metadata": {"name": name},
            "spec": {},
        }
        try:
            await registry.nodemodelstores.create(obj, namespace="")
        except errors.AlreadyExists:
            return
        log.info("seeded NodeModelStore %s", name)

    return seed
