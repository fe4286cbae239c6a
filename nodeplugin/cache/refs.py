"""References: which targets have which published tree bind-mounted, read from the mount table.

A reference *is* a live bind mount of ``objects/sha256/<hex>`` on a target. The kernel keeps those
across plugin restarts, so on start the plugin rebuilds its table from ``/proc/self/mountinfo``
instead of trusting any file; while running, publish and unpublish keep the table current.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re

MOUNTINFO = pathlib.Path("/proc/self/mountinfo")
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclasses.dataclass(frozen=True, slots=True)
class Mount:
    """One line of mountinfo (the fields this module needs)."""

    mount_id: int
    device: str
    """``major:minor`` of the filesystem."""
    root: str
    """The path inside that filesystem which is mounted here (a bind mount's source)."""
    mount_point: str


def unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (``\\040``)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    mounts: list[Mount] = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        try:
            mount_id = int(fields[0])
        except ValueError:
            continue
        mounts.append(Mount(mount_id, fields[2], unescape(fields[3]), unescape(fields[4])))
    return mounts


def read_mountinfo() -> str:
    return MOUNTINFO.read_text(errors="surrogateescape")


def source_prefix(mounts: list[Mount], directory: str) -> tuple[str, str] | None:
    """Where ``directory`` lives as ``(device, path inside that filesystem)``.

    Found from the mount with the longest mount point containing the directory: its ``root`` plus
    the rest of the path. A bind mount from the cache then shows that path (or one below it) as
    its ``root`` on the same device, whatever path the cache is reached by in this namespace.
    """
    directory = os.path.realpath(directory)
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point
        inside = directory == point or directory.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.mount_point)):
            best = mount
    if best is None:
        return None
    rest = os.path.relpath(directory, best.mount_point)
    inner = best.root if rest == "." else os.path.join(best.root, rest)
    return best.device, os.path.normpath(inner)


def under(mounts: list[Mount], directory: str) -> dict[str, str]:
    """``{target: name}`` for every mount whose source lies in ``directory``'s entry ``name``
    (the kernel shows a bind's source where it is now: a tree renamed after it was mounted is
    shown at its new place)."""
    where = source_prefix(mounts, directory)
    if where is None:
        return {}
    device, prefix = where
    lead = prefix.rstrip("/") + "/"
    found: dict[str, str] = {}
    for mount in mounts:
        if mount.device != device or not mount.root.startswith(lead):
            continue
        found[mount.mount_point] = mount.root[len(lead) :].split("/", 1)[0]
    return found


def scan(mounts: list[Mount], objects_dir: str) -> dict[str, str]:
    """``{target: hex}`` for every mount whose source is a tree under ``objects_dir``."""
    return {target: name for target, name in under(mounts, objects_dir).items()
            if len(name) == 64}


class References:
    """``target -> digest`` for every live mount this plugin serves; counts per digest."""

    def __init__(self, initial: dict[str, str] | None = None) -> None:
        self._targets: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        for target, digest in (initial or {}).items():
            self.add(target, digest)

    def get(self, target: str) -> str | None:
        return self._targets.get(target)

    def add(self, target: str, digest: str) -> None:
        previous = self._targets.get(target)
        if previous == digest:
            return
        if previous is not None:
            self.remove(target)
        self._targets[target] = digest
        self._counts[digest] = self._counts.get(digest, 0) + 1

    def remove(self, target: str) -> str | None:
        digest = self._targets.pop(target, None)
        if digest is not None:
            left = self._counts[digest] - 1
            if left:
                self._counts[digest] = left
            else:
                del self._counts[digest]
        return digest

    def count(self, digest: str) -> int:
        return self._counts.get(digest, 0)

    def digests(self) -> set[str]:
        return set(self._counts)

    def __len__(self) -> int:
        return len(self._targets)
