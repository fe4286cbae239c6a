"""``GET modelartifacts/{name}/manifest``: the files an artifact resolved to, from the manifest the
resolver kept (written by ``apiserver/wiring/manifests.py``, the resolver's keeper).

One value per digest at ``/manifests/<digest hex>``, a key no API serves (as the proofs' and the
leases'): the canonical manifest text (``openapi.manifest``), zlib-compressed, written once (a
digest names its content, so a second write of the same key is the same bytes). A manifest
larger than ``MAX_STORED`` compressed or ``MAX_TEXT`` as text is not kept (the subresource then
says so), so one value never nears etcd's request limit. A read checks the text against the
artifact's digest before answering: what is served is what the digest names, or nothing.
"""

from __future__ import annotations

import zlib

from apiserver.registry import statuses, store
from apiserver.storage import interface
from openapi import manifest, resources
from openapi.kinds import manifest as manifestview
from openapi.kinds import modelartifact

PREFIX = "/manifests/"
MAX_TEXT = 32 * 1024 * 1024
MAX_STORED = 1024 * 1024
NOT_RECORDED = (
    "The manifest of this digest is not recorded: it is written at the artifact's next "
    "resolution or revalidation by the embedded controllers (never with --controllers=external "
    f"alone), and never for a manifest over {MAX_STORED // 1024} KiB compressed.")
MISMATCH = "The recorded manifest does not match the artifact's digest; it is not served."
_WIRE_ALGORITHM = {"sha256": "sha256", "gitsha1": "gitBlobId"}


def key(digest: str) -> str:
    return f"{PREFIX}{digest.removeprefix('sha256:')}"


def pack(canonical: bytes) -> bytes | None:
    """The stored value of a manifest text; None when it is too large to keep."""
    if len(canonical) > MAX_TEXT:
        return None
    packed = zlib.compress(canonical, 6)
    return packed if len(packed) <= MAX_STORED else None


def _unpack(packed: bytes) -> bytes | None:
    inflate = zlib.decompressobj()
    try:
        text = inflate.decompress(packed, MAX_TEXT + 1)
    except zlib.error:
        return None
    return None if len(text) > MAX_TEXT or inflate.unconsumed_tail else text


def _file(entry: manifest.Entry) -> manifestview.ManifestFile:
    found = manifestview.ManifestFile(path=entry.path, size=entry.size)
    found[_WIRE_ALGORITHM[entry.algorithm]] = entry.hexdigest  # type: ignore[literal-required]
    return found


async def read(storage: interface.Store, artifacts: store.ResourceStore, namespace: str,
               name: str) -> manifestview.ModelArtifactManifest:
    artifact = await artifacts.get(namespace, name)
    body = manifestview.ModelArtifactManifest(
        kind=manifestview.KIND, apiVersion=resources.GROUP_VERSION,
        metadata={"name": name, "namespace": namespace})
    digest, why = modelartifact.hub_digest(artifact)
    if not digest:
        body.update(manifestview.ModelArtifactManifest(files=[], reason=why))
        return body
    body.update(manifestview.ModelArtifactManifest(manifestDigest=digest))
    try:
        record = await storage.get(key(digest))
    except interface.StorageError as exc:
        raise statuses.from_storage(exc) from None
    text = None if record is None else _unpack(record.value)
    if text is None:
        body.update(manifestview.ModelArtifactManifest(files=[], reason=NOT_RECORDED))
        return body
    try:
        entries = manifest.parse(text)
    except manifest.ManifestError:
        entries = None
    if entries is None or manifest.digest_of_bytes(text) != digest:
        body.update(manifestview.ModelArtifactManifest(files=[], reason=MISMATCH))
        return body
    body.update(manifestview.ModelArtifactManifest(
        fileCount=len(entries), sizeBytes=sum(e.size for e in entries),
        files=[_file(e) for e in entries]))
    return body
