"""Mount authorization: may this Pod's volume have the digest it names?

Every rule is checked against the informer's copy of the API, never against the volume's own
hints, and each refusal names the rule it failed. The namespace is the one kubelet writes
(``csi.storage.k8s.io/pod.namespace``), which kubelet copies over any attribute of the same name the
Pod sets itself, so a Pod cannot claim another namespace. The digest is never authorization by
itself: content already on the node is refused to a namespace with no resolved artifact naming it,
and an artifact resolved to its anchor without the hub (``digestSource: Expected``) names it only
with the proof the worker recorded that its namespace may have that content (``anchorProof``;
``openapi.anchors``): the status is the worker's alone to write, so no tenant can forge either.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

from nodeplugin import artifacts, errors
from nodeplugin.cache import targets
from openapi import anchors, grammar, sources, volume


@dataclasses.dataclass(frozen=True, slots=True)
class Grant:
    """An authorized mount: the artifact it was judged by and the digest it may have."""

    artifact: artifacts.Artifact
    digest: str
    target: str


def check_target(target: str, kubelet_dir: str) -> str:
    """The canonical target, refused unless it lies strictly under the kubelet directory and
    neither it nor any directory on its way there is a symlink (``cache.targets``).

    The result is the path the mount table will show (references rebuilt from it after a restart
    match the targets kubelet sends), under the kubelet directory's real path.
    """
    return _rules(kubelet_dir).check(target)


@functools.lru_cache(maxsize=8)
def _rules(kubelet_dir: str) -> targets.Targets:
    """One ``Targets`` per kubelet directory, so its resolved path is reused between mounts."""
    return targets.Targets(kubelet_dir)


def authorize(
    informer: artifacts.Informer,
    *,
    kubelet_dir: str,
    target: str,
    mount_capability: bool,
    volume_context: Mapping[str, str],
    walk: bool = True,
) -> Grant:
    """Return the grant or raise PermissionDenied / InvalidArgument / Unavailable.

    With ``walk=False`` the target is only checked lexically (``targets.Targets.canonical``):
    the caller then walks it before anything else touches it (``cache.volumes`` does, on its
    way to the mount; the CSI service does before materializing), saving one walk per mount.
    """
    # Rule 1: an inline ephemeral volume with a mount capability and a target we may use.
    if volume_context.get(volume.EPHEMERAL) != "true":
        raise errors.PermissionDenied(
            "only inline ephemeral volumes are served (csi.storage.k8s.io/ephemeral is not "
            "\"true\"; is podInfoOnMount set on the CSIDriver?)"
        )
    if not mount_capability:
        raise errors.PermissionDenied("the volume capability must be a mount, not a block device")
    if walk:
        norm_target = check_target(target, kubelet_dir)
    else:
        norm_target = _rules(kubelet_dir).canonical(target)
    namespace = volume_context.get(volume.POD_NAMESPACE, "")
    if not namespace:
        raise errors.InvalidArgument(
            "volume context lacks csi.storage.k8s.io/pod.namespace (podInfoOnMount must be true)"
        )
    name = volume_context.get(volume.ARTIFACT, "")
    uid = volume_context.get(volume.ARTIFACT_UID, "")
    digest = volume_context.get(volume.MANIFEST_DIGEST, "")
    for key, value in ((volume.ARTIFACT, name), (volume.ARTIFACT_UID, uid),
                       (volume.MANIFEST_DIGEST, digest)):
        if not value:
            raise errors.InvalidArgument(f"volume attribute {key!r} is required")
    if not grammar.is_digest(digest):
        raise errors.InvalidArgument(
            "volume attribute manifestDigest must be sha256:<64 lowercase hex>, "
            f"got {digest[:80]!r}"
        )
    if not informer.synced:
        detail = f" (last error: {informer.last_error})" if informer.last_error else ""
        raise errors.Unavailable(
            "the plugin has not read the ModelArtifacts from the API yet; retry shortly" + detail
        )
    # Rule 2: the artifact exists in the Pod's own namespace.
    art = informer.get(namespace, name)
    if art is None:
        raise errors.PermissionDenied(f"no ModelArtifact {name!r} in namespace {namespace!r}")
    ref = f"ModelArtifact {namespace}/{name}"
    # Rule 3: identity, source kind, resolution and digest.
    if art.uid != uid:
        raise errors.PermissionDenied(
            f"{ref} has UID {art.uid}, not the volume's artifactUID {uid[:64]}"
        )
    if art.source_kind not in sources.HUB_KINDS:
        kind = art.source_kind or "no"
        raise errors.PermissionDenied(
            f"{ref} has a {kind} source; this driver mounts only Hugging Face or ModelScope "
            "artifacts (mount a claim directly)"
        )
    if not art.resolved:
        why = f" (reason {art.resolved_reason})" if art.resolved_reason else ""
        raise errors.PermissionDenied(f"{ref} is not Resolved=True{why}")
    if art.manifest_digest != digest:
        raise errors.PermissionDenied(
            f"{ref} resolved to {art.manifest_digest or 'no digest'}, not the volume's "
            f"manifestDigest {digest}"
        )
    # Rule 4: an identity the hub never bound to a commit (the anchor, digestSource Expected)
    # stands on a proof that this namespace may have it.
    anchored = art.digest_source == anchors.DIGEST_FROM_ANCHOR or not art.revision
    if anchored and art.anchor_proof not in anchors.PROOFS:
        raise errors.PermissionDenied(
            f"{ref} resolved to its anchor {digest} without the hub, and the worker recorded no "
            f"proof that namespace {namespace!r} may have that content (status.resolved."
            "anchorProof is not set: no hub-verified artifact of the namespace and no "
            "administrator's anchor grant)"
        )
    return Grant(artifact=art, digest=digest, target=norm_target)

