"""Caches of an older format, brought to this plugin's (``layout.FORMAT``) at start.

Format 1 (no ``state/cache-format``: every plugin before the file store) kept each tree's own
files, so two trees listing the same file held two copies. Format 2 keeps every file once under
``files/`` and each tree's files are links of the stored copies (``cache.files``,
``cache.check``'s link rule). The plugin converts at start, tree by tree, with the checks of the
trees found at start (``cache.integrity``): a tree is converted under its digest's exclusive
lock just before it is checked, by the start pass or by its first mount, whichever comes first,
so none is used before. Converting a tree (``tree``) makes each of its files the stored copy of
its content, or, when another tree already gave the store a copy, points the file's name at
that copy in one rename (the same bytes: a Pod reading the tree meanwhile reads either inode
whole, and an open file keeps its own). Nothing else of the tree changes, and it stays where it
is. A tree that fails the older rule (its stored manifest, its files' names and sizes) is left
as it is, and its check then quarantines it. Once every tree found at start was converted or
quarantined, the format is recorded (``finish``); a crash before that converts again at the
next start (converting a converted tree changes nothing).

A cache of a later format than this plugin's is refused at start (``check_format``), rather
than changed by rules it does not know. A cache with no tree is of this format from the start
(``layout.Layout.create``).
"""

from __future__ import annotations

from durable import disk
from nodeplugin.cache import check, files, layout


class NewerFormat(Exception):
    """The cache was written by a later plugin; ``message`` says what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_format(cache: layout.Layout) -> bool:
    """True when the cache's trees are to be converted at this start; raises ``NewerFormat``
    for a format this plugin does not know. Blocking."""
    try:
        found = cache.format()
    except layout.LayoutError as exc:
        raise NewerFormat(f"{exc}; remove the cache root's contents or fix the file") from None
    if found > layout.FORMAT:
        raise NewerFormat(
            f"the cache at {cache.root} is of format {found}, written by a later plugin; this "
            f"plugin knows formats up to {layout.FORMAT} (run the later plugin, or empty the "
            "cache root to start it again)")
    return found < layout.FORMAT


def tree(cache: layout.Layout, digest: str) -> int:
    """Make every file of ``digest``'s tree a link of the stored copy of its content (see the
    module's text); the files it pointed at an existing copy. A tree that fails the older rule
    is left alone (its check judges it). Blocking; the caller holds the digest's lock
    exclusive."""
    try:
        _, entries = check.stored(cache, digest)
        found = check.files(cache, digest)
    except (check.Damaged, OSError):
        return 0
    if check.compare(entries, found) is not None:
        return 0
    store = files.of(cache)
    root = cache.published_path(digest)
    shared = 0
    for entry in entries:
        if entry.size == 0:
            continue
        info = found[entry.path]
        copy = store.stored(entry)
        if copy is not None and (copy.st_dev, copy.st_ino) == (info.st_dev, info.st_ino):
            continue
        path = root / entry.path
        store.put(path, entry)
        if copy is not None:
            shared += 1
            disk.fsync_path(path.parent)
    store.sync()
    return shared


def finish(cache: layout.Layout) -> None:
    """Record this plugin's format: every tree found at start was converted (or quarantined)."""
    cache.set_format(layout.FORMAT)
