"""The node plugin's HTTPS port as its callers see it: the port, the two paths and their bodies.

The plugin serves ``GET /model/downloads`` (its running downloads, for the live progress view) and
``POST /model/prefetches`` (the worker asks it to hold an artifact, a ModelPrefetch's standalone
delivery); the API server and the controllers call them, in a cluster with a token for
``AUDIENCE``. Both sides take the names and the body
shapes from here (``tests/unit/openapi/test_wire_owners.py``); the chart's ``securePort`` is checked
against ``DEFAULT_PORT`` (``tests/unit/charts/test_install_contract.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypedDict

from openapi import states, volume, wire

DEFAULT_PORT: Final = 32444
"""The plugin's HTTPS port (metrics, health, the two paths below) unless ``--secure-port`` says."""

AUDIENCE: Final = f"{volume.DRIVER}/plugin"
"""The audience of the token the worker sends to this port: the plugin reviews it for this audience
alone, so the worker's API token is refused here and this token is refused by kube-apiserver
(a plugin cannot replay what it receives). Standalone mode uses the shared token file instead."""
TOKEN_FILE: Final = f"/var/run/secrets/{volume.DRIVER}/plugin/token"
"""Where the worker reads its projected token for ``AUDIENCE`` (``--plugin-token-file``)."""

DOWNLOADS: Final = "/model/downloads"
PREFETCHES: Final = "/model/prefetches"


class Download(TypedDict):
    """One running download: a digest and how far its attempt got."""

    digest: str
    downloadedBytes: int
    sizeBytes: int
    """0 while the attempt is still listing the files."""
    source: states.Origin


class Downloads(TypedDict):
    """The answer of ``GET /model/downloads``."""

    downloads: list[Download]


class _PrefetchRequestRequired(TypedDict):
    namespace: str
    artifact: str
    artifactUID: str
    manifestDigest: str


class PrefetchRequest(_PrefetchRequestRequired, total=False):
    """The body of ``POST /model/prefetches``: the artifact as a volume in ``namespace`` would
    name it (``openapi.volume``), and the hub token its ``secretRef`` holds, if any."""

    token: str


REQUEST_KEYS: Final = ("namespace", volume.ARTIFACT, volume.ARTIFACT_UID, volume.MANIFEST_DIGEST,
                       "token")
"""Every key of a ``PrefetchRequest``, in the order the plugin checks them."""


def prefetch_request(namespace: str, name: str, uid: str, digest: str,
                     token: str = "") -> PrefetchRequest:
    """The request for artifact ``name`` (UID ``uid``) of ``namespace``, resolved to ``digest``."""
    request = PrefetchRequest(namespace=namespace, artifact=name, artifactUID=uid,
                              manifestDigest=digest)
    if token:
        request["token"] = token
    return request


class _PrefetchAnswerRequired(TypedDict):
    state: states.DeliveryState


class PrefetchAnswer(_PrefetchAnswerRequired, total=False):
    """The answer of ``POST /model/prefetches``: the materialization's state; with ``Failed``
    the reason and message a mount would get."""

    digest: str
    downloadedBytes: int
    sizeBytes: int
    reason: str
    message: str


def downloaded_bytes(document: object) -> dict[str, int]:
    """Bytes held per digest in a ``Downloads`` answer; ValueError when it holds no list."""
    running = document.get("downloads") if isinstance(document, Mapping) else None
    if not isinstance(running, list):
        raise ValueError("no downloads list")
    found: dict[str, int] = {}
    for item in running:
        digest, have = wire.text(item, "digest"), wire.integer(item, "downloadedBytes")
        if digest and have is not None:
            found[digest] = max(0, have)
    return found


def answer_state(document: object) -> str:
    """The ``state`` of a ``PrefetchAnswer``; ``""`` when it says none."""
    return wire.text(document, "state")


def answer_message(document: object) -> str:
    """The ``message`` of a ``PrefetchAnswer`` (or of a ``Status``); ``""`` when none."""
    found = wire.dig(document, "message")
    return str(found) if found else ""
