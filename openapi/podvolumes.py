"""A Pod's model volumes (its inline CSI volumes of ``model.csi.gpustack.ai``) and the JSON Patch
operations that fill what each left out from the artifact it names.

A volume naming only ``artifact`` gets ``artifactUID`` and ``manifestDigest`` from that artifact
in the Pod's namespace, the values the node plugin checks at mount time
(``nodeplugin/authorize.py`` stays the one rule): only once the artifact is ``Resolved`` with a
digest and a hub source. A value the Pod set is never changed; an attribute absent or empty is
filled. An artifact that is missing or not usable yet leaves the volume as it is, with a warning
(the plugin then refuses the mount and says why). The API server's Pod webhook and
``kube.gpustack`` use it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from openapi import sources, volume, wire
from openapi.kinds import modelartifact

MAX_WARNINGS: Final = 8
"""The most warnings one review carries (the rest are counted in the last)."""
MAX_NAME: Final = 253
"""Names quoted in a warning are cut to this."""

Operation = wire.Obj
Lookup = Callable[[str], "wire.Readable | None"]
"""artifact name -> the ModelArtifact in the Pod's namespace, None when there is none."""


@dataclasses.dataclass(frozen=True, slots=True)
class ModelVolume:
    index: int
    """The volume's index in ``spec.volumes`` (the patch's path)."""
    name: str
    artifact: str
    artifact_uid: str
    manifest_digest: str


def cut(text: str, limit: int = MAX_NAME) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def model_volumes(pod: wire.Readable) -> list[ModelVolume]:
    """The Pod's inline CSI volumes of the driver, in order."""
    found = []
    listed = wire.dig(pod, "spec", "volumes")
    for index, item in enumerate(listed if isinstance(listed, list) else []):
        csi = wire.dig(item, "csi")
        if not isinstance(csi, dict) or csi.get("driver") != volume.DRIVER:
            continue
        attributes = csi.get("volumeAttributes")
        found.append(ModelVolume(
            index=index, name=wire.text(item, "name"),
            artifact=wire.text(attributes, volume.ARTIFACT),
            artifact_uid=wire.text(attributes, volume.ARTIFACT_UID),
            manifest_digest=wire.text(attributes, volume.MANIFEST_DIGEST)))
    return found


def digests(pod: wire.Readable) -> list[str]:
    """The distinct ``manifestDigest`` values the Pod's model volumes name, in order."""
    return list(dict.fromkeys(v.manifest_digest for v in model_volumes(pod) if v.manifest_digest))


def unusable(artifact: wire.Readable) -> str:
    """Why the plugin would not mount ``artifact`` whatever the attributes say; ``""`` if it
    would (resolved, with a digest, from a hub)."""
    if not sources.hub_kind(modelartifact.source_kind(artifact)):
        kind = modelartifact.source_kind(artifact) or "no"
        return f"it has a {kind} source; this driver mounts only Hugging Face or ModelScope ones"
    if not modelartifact.is_resolved(artifact) or not modelartifact.manifest_digest(artifact):
        condition = modelartifact.resolved_condition(artifact) or {}
        reason = wire.text(condition, "reason")
        return "it is not resolved yet" + (f" (reason {cut(reason, 64)})" if reason else "")
    return ""


@dataclasses.dataclass
class Fill:
    operations: list[Operation] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def _path(index: int, key: str | None = None) -> str:
    base = f"/spec/volumes/{index}/csi/volumeAttributes"
    return base if key is None else f"{base}/{key}"


def fill(pod: wire.Readable, namespace: str, lookup: Lookup) -> Fill:
    """The operations filling each model volume's missing attributes, and the warnings."""
    done = Fill()
    for each in model_volumes(pod):
        label = f"volume {cut(each.name, 63)!r}"
        if not each.artifact:
            done.warn(f"{label} of driver {volume.DRIVER} names no {volume.ARTIFACT} attribute; "
                      "the node plugin refuses to mount it")
            continue
        if each.artifact_uid and each.manifest_digest:
            continue
        ref = f"ModelArtifact {cut(each.artifact)!r} in namespace {cut(namespace, 63)!r}"
        artifact = lookup(each.artifact)
        if artifact is None:
            done.warn(f"{label}: no {ref}; the Pod is admitted as it is and the node plugin "
                      "refuses the mount until the artifact exists and the attributes match")
            continue
        why = unusable(artifact)
        if why:
            done.warn(f"{label}: {ref} cannot be mounted: {why}; its attributes were left as "
                      "they are")
            continue
        values = {volume.ARTIFACT_UID: wire.text(artifact, "metadata", "uid"),
                  volume.MANIFEST_DIGEST: modelartifact.manifest_digest(artifact)}
        for key, have in ((volume.ARTIFACT_UID, each.artifact_uid),
                          (volume.MANIFEST_DIGEST, each.manifest_digest)):
            if not have:
                done.operations.append({"op": "add", "path": _path(each.index, key),
                                        "value": values[key]})
            elif have != values[key]:
                done.warn(f"{label}: {key} {cut(have, 80)!r} is not {ref}'s "
                          f"{values[key]!r}; kept as the Pod set it, so the node plugin "
                          "refuses the mount")
    if len(done.warnings) > MAX_WARNINGS:
        rest = len(done.warnings) - MAX_WARNINGS + 1
        done.warnings[MAX_WARNINGS - 1:] = [f"... and {rest} more warnings"]
    return done
