"""Atomic publication of a verified staging directory as ``objects/sha256/<hex>``.

The protocol (the only way anything reaches ``objects/``):

1. with the manifest: every file it lists (but the empty ones) is in the staging directory with
   its size and becomes the node's stored copy of its content, or a link of the stored copy
   when there is one already (``files.FileStore.put``), and the store's names are synced;
2. every file is made read-only (0444) and synced, every directory made 0555 and synced;
3. the marker naming the digest (and, when given, the canonical manifest) is written and synced;
4. the staging directory is renamed to its published name in one step;
5. both parents are synced, so the rename survives a crash.

A crash before step 4 leaves a partial directory (removed at the next start unless resumable,
and then the stored files it alone linked are swept); a crash after it leaves a complete tree
with its marker whose files are all in the store. Nothing under ``objects/`` is changed in
place afterwards. Callers verify the content first (size and hash of every manifest entry); this
module only refuses reserved names and symlinks, which no manifest can describe, and a listed
file that is missing or of another size.

Before step 1, ``sweep`` removes whatever the staging directory holds that the manifest does not
name (torn temporary files of an earlier attempt).

Blocking: call from a thread (``asyncio.to_thread(publish.publish_tree, ...)``).
"""

from __future__ import annotations

import errno
import os
import pathlib
import stat

from durable import disk
from nodeplugin.cache import files, fsutil, layout
from openapi import manifest

FILE_MODE = files.FILE_MODE
DIR_MODE = 0o555


class PublishError(OSError):
    """The staging directory cannot be published (bad content or a file-system failure)."""


def publish_tree(
    cache: layout.Layout,
    staging: pathlib.Path,
    digest: str,
    *,
    manifest_bytes: bytes | None = None,
    store: files.FileStore | None = None,
) -> pathlib.Path:
    """Publish ``staging`` (a verified tree for ``digest``) and return the published path.
    ``store``: the node's file store (by default the cache root's, ``files.of``).

    If the digest is already published (another attempt won the race) the staging directory is
    removed and the existing tree returned: publication is idempotent per digest.
    """
    final = cache.published_path(digest)
    if cache.is_published(digest):
        fsutil.remove_tree(staging)
        return final
    for name in layout.RESERVED_NAMES:
        if os.path.lexists(staging / name) and name != layout.RESUMABLE:
            raise PublishError(errno.EINVAL, f"staging tree holds the reserved name {name!r}")
    if manifest_bytes is not None:
        _store(store or files.of(cache), staging, manifest_bytes)
    resumable = staging / layout.RESUMABLE
    if os.path.lexists(resumable):
        os.unlink(resumable)
    _seal(staging)
    if manifest_bytes is not None:
        _write_readonly(staging / layout.MANIFEST, manifest_bytes)
    _write_readonly(staging / layout.MARKER, layout.marker_bytes(digest))
    os.chmod(staging, DIR_MODE)
    disk.fsync_path(staging)
    if os.path.lexists(final) and not cache.is_published(digest):
        # A directory without its marker is debris from outside the protocol; it is never
        # mounted, so clearing it cannot pull a tree from under a Pod.
        fsutil.remove_tree(final)
    try:
        os.rename(staging, final)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY) and cache.is_published(digest):
            fsutil.remove_tree(staging)
            return final
        raise
    disk.fsync_path(final.parent)
    disk.fsync_path(staging.parent)
    return final


def _store(store: files.FileStore, staging: pathlib.Path, manifest_bytes: bytes) -> None:
    """Every listed file into the node's file store (each a link of the stored copy after)."""
    try:
        entries = manifest.parse(manifest_bytes)
    except manifest.ManifestError as exc:
        raise PublishError(errno.EINVAL, f"the manifest cannot be read: {exc}") from None
    for entry in entries:
        path = staging / entry.path
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            raise PublishError(errno.ENOENT, f"{entry.path}: missing from the staging tree") \
                from None
        if not stat.S_ISREG(info.st_mode) or info.st_size != entry.size:
            raise PublishError(errno.EINVAL, f"{entry.path}: not a file of the listed size")
        store.put(path, entry)
    store.sync()


def _seal(root: pathlib.Path) -> None:
    """Make every file 0444 and directory 0555, fsyncing each; refuse symlinks and specials."""
    for dirpath, dirnames, filenames in os.walk(root, topdown=False, followlinks=False):
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, FILE_MODE)
                disk.fsync_path(path)
            elif stat.S_ISDIR(mode):
                os.chmod(path, DIR_MODE)
                disk.fsync_path(path)
            else:
                raise PublishError(errno.EINVAL, f"staging tree holds a non-regular file {path!r}")


def _write_readonly(path: pathlib.Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def sweep(root: pathlib.Path, paths: set[str]) -> None:
    """Remove anything in the staging tree the manifest does not name (torn temp files), before
    ``publish_tree`` (blocking)."""
    keep_dirs = {str(pathlib.PurePosixPath(p).parent) for p in paths}
    for p in list(keep_dirs):
        parts = pathlib.PurePosixPath(p).parts
        keep_dirs.update(str(pathlib.PurePosixPath(*parts[:i])) for i in range(1, len(parts)))
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if rel not in paths and rel != layout.RESUMABLE:
                os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if rel not in keep_dirs:
                fsutil.remove_tree(pathlib.Path(dirpath) / name)

