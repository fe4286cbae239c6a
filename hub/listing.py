"""From a hub listing to the artifact's manifest: filter by the patterns, check every path, and
compute the canonical digest with ``openapi.manifest`` (so resolver and node plugin agree)."""

from __future__ import annotations

from collections.abc import Sequence

from hub import errors, files, patterns, source
from openapi import manifest, reasons


def build(
    listed: Sequence[files.RemoteFile], allow: Sequence[str], ignore: Sequence[str]
) -> tuple[list[files.RemoteFile], list[manifest.Entry], str]:
    """The kept files and entries (in manifest order) and the manifest digest.

    Every listed path is checked, kept or not: the manifest describes a commit, and a commit
    with an unusable path fails as a whole (``InvalidRequest``).
    """
    try:
        for remote in listed:
            manifest.check_path(remote.path)
        kept = sorted(patterns.select(listed, allow, ignore), key=lambda f: f.path.encode())
        entries = [files.to_entry(remote) for remote in kept]
        digest = manifest.digest(entries)
    except manifest.ManifestError as exc:
        raise errors.HubError(reasons.INVALID_REQUEST, f"unusable listing: {exc}") from exc
    return kept, entries, digest


async def manifest_for(
    source_client: source.Source,
    repo: str,
    commit: str,
    allow: Sequence[str],
    ignore: Sequence[str],
    *,
    token: str | None,
) -> tuple[list[files.RemoteFile], list[manifest.Entry], str]:
    """List the commit with the caller's token and build its filtered manifest."""
    listed = await source_client.list_files(repo, commit, token=token)
    return build(listed, allow, ignore)
