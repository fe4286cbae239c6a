"""The words of an anchor (``spec.expectedDigest`` standing for the content without the hub):
the one place they are spelled (docs/security.md, "Anchors need proof").

An anchored artifact whose hub stays unreachable resolves to its anchor (``digestSource:
Expected``) only with a proof that its namespace may have that content, which the worker writes
in ``status.resolved.anchorProof``:

- ``Grant``: an administrator granted it. A user allowed verb ``anchor`` on ``modelartifacts``
  in the namespace sets the annotation ``worker.gpustack.ai/anchor-grant``; admission checks
  that verb (``apiserver/admission/anchors.py``) and records the grant in ``status.anchorGrant``,
  which no tenant can write;
- ``HubVerified``: an artifact of the same namespace resolved to that digest from the hub's own
  listing, still resolved now or verified within the last revalidation interval (the worker's
  record, ``controllers/runtime/proofs.py``).

The node plugin mounts an ``Expected`` identity only with one of them.
"""

from __future__ import annotations

from typing import Final, Literal

from openapi import resources

DigestSource = Literal["Hub", "Expected"]
Proof = Literal["Grant", "HubVerified"]

DIGEST_FROM_HUB: Final = "Hub"
"""``status.resolved.digestSource``: the digest came from the hub's own listing."""
DIGEST_FROM_ANCHOR: Final = "Expected"
"""``status.resolved.digestSource``: the digest is the spec's anchor, the hub unreachable."""
DIGEST_SOURCES: Final[tuple[DigestSource, ...]] = (DIGEST_FROM_HUB, DIGEST_FROM_ANCHOR)

GRANT: Final = "Grant"
HUB_VERIFIED: Final = "HubVerified"
PROOFS: Final[tuple[Proof, ...]] = (GRANT, HUB_VERIFIED)
"""``status.resolved.anchorProof``: why an ``Expected`` identity may be mounted."""

ANNOTATION: Final = f"{resources.GROUP}/anchor-grant"
"""Set by a user allowed ``VERB``: lets the anchor be the resolution (its value is free text, for
the reader: who and why)."""
VERB: Final = "anchor"
"""The RBAC verb on ``modelartifacts`` that may set ``ANNOTATION`` (like kube's ``bind``)."""
RESOURCE: Final = resources.MODEL_ARTIFACT.plural
