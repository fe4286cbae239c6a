"""Content negotiation on Accept: the full object, a Table, or PartialObjectMetadata(List).

JSON is always acceptable (``application/json``, ``application/*``, ``*/*`` or no Accept at all);
protobuf is never chosen. 406 only when nothing listed can be served.
"""

from __future__ import annotations

import dataclasses
import enum

from apiserver import errors

META_GROUP = "meta.k8s.io"
META_VERSIONS = ("v1", "v1beta1")


class View(enum.Enum):
    OBJECT = "Object"
    TABLE = "Table"
    METADATA = "PartialObjectMetadata"
    METADATA_LIST = "PartialObjectMetadataList"


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    view: View
    version: str = "v1"
    """The meta.k8s.io version of a Table or PartialObjectMetadata reply."""

    @property
    def api_version(self) -> str:
        return f"{META_GROUP}/{self.version}"


OBJECT = Target(View.OBJECT)
_JSON_TYPES = ("application/json", "application/*", "*/*")


@dataclasses.dataclass(frozen=True, slots=True)
class MediaRange:
    type: str
    params: dict[str, str]
    quality: float


def parse_accept(header: str) -> list[MediaRange]:
    """Media ranges in preference order: by ``q``, then as the client wrote them.

    Parameter names are lower-cased and quotes dropped; an unreadable ``q`` counts as 1, so a
    sloppy client is served rather than refused.
    """
    ranges: list[MediaRange] = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params: dict[str, str] = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            quality = float(params.pop("q", "1"))
        except ValueError:
            quality = 1.0
        ranges.append(MediaRange(pieces[0].lower(), params, quality))
    # A stable sort keeps the client's order among equal qualities.
    return sorted(ranges, key=lambda r: -r.quality)


def negotiate(accept: str | None, *, collection: bool = False) -> Target:
    """The reply shape for a get/watch (``collection=False``) or a list (``True``)."""
    if not accept or not accept.strip():
        return OBJECT
    for media in parse_accept(accept):
        params = media.params
        if media.quality <= 0 or media.type not in _JSON_TYPES:
            continue
        shape = params.get("as")
        if not shape:
            return OBJECT
        if params.get("g") != META_GROUP or params.get("v") not in META_VERSIONS:
            continue
        version = params["v"]
        if shape == "Table":
            return Target(View.TABLE, version)
        if shape == "PartialObjectMetadata" and not collection:
            return Target(View.METADATA, version)
        if shape == "PartialObjectMetadataList" and collection:
            return Target(View.METADATA_LIST, version)
    raise errors.NotAcceptable(
        "only the following media types are accepted: application/json,"
        " application/json;as=Table;v=v1;g=meta.k8s.io,"
        " application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,"
        " application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
    )
