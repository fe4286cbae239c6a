"""The source kinds of a ModelArtifact: the one place their names are spelled.

``spec.source`` holds exactly one of them. The two hubs resolve to a commit and a manifest
digest and are downloaded file by file; a claim and an image are mounted whole. Admission, the
schema, the printer columns, the resolver, the progress view and the node plugin all take the
names, the hub set, the display names and the default revisions from here
(``tests/unit/openapi/test_sources.py`` fails when a second copy appears).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

HUGGING_FACE: Final = "huggingFace"
MODEL_SCOPE: Final = "modelScope"
CLAIM: Final = "persistentVolumeClaim"
IMAGE: Final = "image"

HubKind = Literal["huggingFace", "modelScope"]
HUB_KINDS: Final[tuple[HubKind, ...]] = (HUGGING_FACE, MODEL_SCOPE)
KINDS: Final[tuple[str, ...]] = (HUGGING_FACE, MODEL_SCOPE, CLAIM, IMAGE)
"""Every source kind, in the order admission names them."""
WHOLE_KINDS: Final[tuple[str, ...]] = (CLAIM, IMAGE)
"""Sources mounted whole: no file patterns, no manifest digest."""
HUB_NAMES: Final[Mapping[HubKind, str]] = {HUGGING_FACE: "Hugging Face", MODEL_SCOPE: "ModelScope"}
DEFAULT_REVISIONS: Final[Mapping[HubKind, str]] = {HUGGING_FACE: "main", MODEL_SCOPE: "master"}
"""The revision a hub source gets when it names none (each hub's default branch)."""


def hub_kind(kind: str) -> HubKind | None:
    """``kind`` as a hub kind, or None for a claim, an image or anything else."""
    if kind == HUGGING_FACE:
        return HUGGING_FACE
    if kind == MODEL_SCOPE:
        return MODEL_SCOPE
    return None


SECRET_TOKEN_KEY: Final = "token"
"""The key of the Secret a hub source's ``secretRef`` names that holds the hub token."""
