"""One resolution or revalidation pass against a hub, as docs/controllers.md's tables say.

Resolution: the revision becomes a commit (Hugging Face's revision endpoint peels an annotated
tag; ModelScope takes a full commit as is and cross-checks a branch or tag against git), the
commit is listed (every page; ModelScope re-listed per directory past its truncation), the
patterns select the files, and ``openapi.manifest`` gives the digest, compared with the anchor
when there is one. A listing already cached for that commit is reused, and the artifact's own
token is then proven with one HEAD of a file (unless the revision lookup already proved it).

Revalidation: one HEAD of a file at the resolved commit, redirects not followed; an anchored
artifact also re-lists the commit and checks the digest again.

Every refusal is a ``Failure`` carrying the ``Resolved`` reason; messages name the repository and
never a token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from controllers.resolver import hubs
from hub import errors as hub_errors
from hub import files, listing
from openapi import grammar, manifest, reasons, sources

HUB_NAMES = sources.HUB_NAMES


@dataclasses.dataclass(frozen=True, slots=True)
class HubSource:
    kind: hubs.Kind
    repository: str
    revision: str


@dataclasses.dataclass(frozen=True, slots=True)
class Selection:
    allow: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Resolution:
    commit: str
    digest: str
    file_count: int
    size_bytes: int
    entries: tuple[manifest.Entry, ...] = ()
    """The manifest's files, in its order."""


class Failure(Exception):
    """A pass that did not confirm the artifact; ``reason`` is a ``Resolved`` reason."""

    def __init__(self, reason: str, message: str, *, retry_after: float | None = None,
                 from_hub: bool = True) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.from_hub = from_hub
        """False for failures of our own (an unreadable Secret): those never anchor."""

    @property
    def outage(self) -> bool:
        return self.reason == reasons.SOURCE_UNAVAILABLE

    def __repr__(self) -> str:
        return f"Failure({self.reason!r}, {self.message!r})"


_REASONS = {
    reasons.REVISION_NOT_FOUND: reasons.REVISION_NOT_FOUND,
    reasons.ACCESS_DENIED: reasons.ACCESS_DENIED,
    reasons.ENTRY_NOT_FOUND: reasons.ACCESS_DENIED,
    reasons.SOURCE_UNAVAILABLE: reasons.SOURCE_UNAVAILABLE,
    # A bad repository id or revision, an unusable path in the listing, another 4xx: the hub
    # answered, and what it holds cannot become an artifact.
    reasons.INVALID_REQUEST: reasons.UNSUPPORTED_SOURCE,
}


def translate(exc: hub_errors.HubError) -> Failure:
    return Failure(_REASONS[exc.reason], exc.message, retry_after=exc.retry_after)


class Passes:
    def __init__(self, hub_set: hubs.Hubs, cache: hubs.ListingCache) -> None:
        self._hubs = hub_set
        self.cache = cache

    def _key(self, api: hubs.HubApi, src: HubSource, commit: str) -> hubs.CacheKey:
        return (src.kind, api.endpoint, src.repository, commit)

    async def _list(self, api: hubs.HubApi, src: HubSource, commit: str,
                    token: str | None) -> list[files.RemoteFile]:
        listed = await api.list_files(src.repository, commit, token=token)
        self.cache.put(self._key(api, src, commit), listed)
        return listed

    async def resolve(self, src: HubSource, selection: Selection, expected: str,
                      token: str | None) -> Resolution:
        api = self._hubs.get(src.kind)
        try:
            commit = await api.resolve_revision(src.repository, src.revision, token=token)
            # A ModelScope branch or tag was looked up (index and git) with this token; a
            # Hugging Face revision answers a gated repository without a grant, so it proves
            # nothing about the files.
            proven = src.kind == sources.MODEL_SCOPE and not grammar.is_commit(src.revision)
            cached = self.cache.get(self._key(api, src, commit))
            if cached is None:
                listed: Sequence[files.RemoteFile] = await self._list(api, src, commit, token)
                proven = True
            else:
                listed = cached
            kept, entries, digest = listing.build(listed, selection.allow, selection.ignore)
            if not proven and listed:
                probe = kept[0] if kept else listed[0]
                await api.check_access(src.repository, commit, probe.path, token=token)
        except hub_errors.HubError as exc:
            raise translate(exc) from exc
        where = f"{HUB_NAMES[src.kind]} repository {src.repository} at {commit}"
        if not kept:
            raise Failure(reasons.EMPTY_MANIFEST,
                          f"{where}: the patterns keep none of its {len(listed)} files")
        if expected and digest != expected:
            raise Failure(reasons.DIGEST_MISMATCH,
                          f"{where} resolves to {digest}, not the expected {expected}")
        return Resolution(commit, digest, len(entries), sum(e.size for e in entries),
                          tuple(entries))

    async def revalidate(self, src: HubSource, commit: str, digest: str, selection: Selection,
                         *, anchored: bool, token: str | None) -> list[manifest.Entry]:
        """The manifest's entries, confirmed; a ``Failure`` otherwise."""
        api = self._hubs.get(src.kind)
        where = f"{HUB_NAMES[src.kind]} repository {src.repository} at {commit}"
        try:
            listed: Sequence[files.RemoteFile] | None = (
                None if anchored else self.cache.get(self._key(api, src, commit)))
            if listed is None:
                listed = await self._list(api, src, commit, token)
            kept, entries, listed_digest = listing.build(listed, selection.allow,
                                                         selection.ignore)
            if kept:
                await api.check_access(src.repository, commit, kept[0].path, token=token)
        except hub_errors.HubError as exc:
            raise translate(exc) from exc
        if not kept:
            raise Failure(reasons.EMPTY_MANIFEST,
                          f"{where}: the patterns keep none of its files now")
        if listed_digest != digest:
            raise Failure(reasons.DIGEST_MISMATCH,
                          f"{where} now lists {listed_digest}, not the resolved {digest}")
        return entries
