"""The artifact's allow/ignore patterns: ``fnmatch.fnmatchcase``, a trailing ``/`` names a subtree,
an empty allow list keeps everything, and ignore wins over allow."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import TypeVar

from hub import files

T = TypeVar("T", str, files.RemoteFile)


def _matches(path: str, pattern: str) -> bool:
    if pattern.endswith("/"):
        # "dir/" keeps everything below dir (the pattern may itself contain wildcards).
        return fnmatch.fnmatchcase(path, pattern + "*")
    return fnmatch.fnmatchcase(path, pattern)


def keeps(path: str, allow: Sequence[str], ignore: Sequence[str]) -> bool:
    if any(_matches(path, p) for p in ignore):
        return False
    return not allow or any(_matches(path, p) for p in allow)


def select(items: Iterable[T], allow: Sequence[str], ignore: Sequence[str]) -> list[T]:
    """The paths (or files) the patterns keep, in their original order."""
    kept: list[T] = []
    for item in items:
        path = item if isinstance(item, str) else item.path
        if keeps(path, allow, ignore):
            kept.append(item)
    return kept
