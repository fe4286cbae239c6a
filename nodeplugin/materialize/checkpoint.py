"""An attempt's resume ledger: per file, how many bytes are durable and the hash state there.

The ledger is the partial directory's ``RESUMABLE`` file (``layout.RESUMABLE``), so its presence
also tells the plugin at start that the directory belongs to a resumable attempt. An entry is only
ever updated after the file's bytes up to its offset were fsynced, and the ledger itself is
replaced atomically (not synced itself: ``_later``), so after a crash every entry describes bytes
that are on disk: the file is truncated to the entry's offset and hashing continues from the saved
state.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import logging
import pathlib

from durable import disk
from nodeplugin.cache import layout

log = logging.getLogger(__name__)

VERSION = 1
BOOT_ID = pathlib.Path("/proc/sys/kernel/random/boot_id")


@functools.cache
def boot_id() -> str | None:
    """This boot of the kernel (None where unknown: written entries are then never trusted)."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class FileCheckpoint:
    offset: int
    """Bytes of the file that are durable and hashed."""
    state: bytes | None
    """``hashing.Hasher.save()`` at ``offset``; None once ``verified``."""
    verified: bool = False
    """The whole file was received and matched its size and hash."""


class Ledger:
    """The in-memory copy of one partial directory's ledger; ``flush`` writes it (blocking).

    Beside each file's durable checkpoint it may hold a *written* point: an offset and hash state
    whose bytes were written (``pwrite`` returned) but not yet fsynced, valid only in the kernel
    boot that wrote them (``boot_id``). After the plugin alone crashed or was killed those bytes
    are intact (the page cache outlives the process), so a restart in the same boot resumes
    there; after a reboot only the durable checkpoints count.
    """

    def __init__(self, partial_dir: pathlib.Path, digest: str) -> None:
        self.path = partial_dir / layout.RESUMABLE
        self.digest = digest
        self._files: dict[str, FileCheckpoint] = {}
        self._written: dict[str, tuple[int, bytes]] = {}
        self.version = 0
        """Bumped by every change, so writers can tell whether a change is on disk yet."""

    @classmethod
    def load(cls, partial_dir: pathlib.Path, digest: str) -> Ledger:
        """Read the ledger; a missing, torn or foreign one reads as empty (resume from zero)."""
        ledger = cls(partial_dir, digest)
        try:
            body = json.loads(ledger.path.read_bytes() or b"{}")
            if body.get("version") != VERSION or body.get("digest") != digest:
                return ledger
            same_boot = boot_id() is not None and body.get("boot") == boot_id()
            for path, item in body["files"].items():
                state = base64.b64decode(item["state"]) if item.get("state") else None
                ledger._files[str(path)] = FileCheckpoint(
                    int(item["offset"]), state, bool(item.get("verified", False))
                )
                written = item.get("written")
                if same_boot and written:
                    ledger._written[str(path)] = (
                        int(written["offset"]), base64.b64decode(written["state"])
                    )
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable resume ledger in %s: %s", partial_dir.name, exc)
            ledger._files.clear()
            ledger._written.clear()
        return ledger

    def get(self, path: str) -> FileCheckpoint | None:
        return self._files.get(path)

    def put(self, path: str, checkpoint: FileCheckpoint) -> None:
        self._files[path] = checkpoint
        if checkpoint.verified:
            self._written.pop(path, None)
        self.version += 1

    def note_written(self, path: str, offset: int, state: bytes) -> None:
        """The file's bytes up to ``offset`` were written (not synced); ``state`` is the hash
        there."""
        self._written[path] = (offset, state)
        self.version += 1

    def resume_point(self, path: str) -> FileCheckpoint | None:
        """Where a restart continues: the written point (this boot's) if it is further than the
        durable checkpoint, else the checkpoint."""
        durable = self._files.get(path)
        written = self._written.get(path)
        if durable is not None and durable.verified:
            return durable
        if written is not None and (durable is None or written[0] > durable.offset):
            return FileCheckpoint(written[0], written[1])
        return durable

    def discard(self, path: str) -> None:
        self._files.pop(path, None)
        self._written.pop(path, None)
        self.version += 1

    def keep_only(self, paths: set[str]) -> None:
        """Forget entries for files the manifest does not name."""
        for path in list(self._files) + list(self._written):
            if path not in paths:
                self._files.pop(path, None)
                self._written.pop(path, None)
                self.version += 1

    def held_bytes(self) -> int:
        """Bytes the durable checkpoints hold (written points not counted)."""
        return sum(c.offset for c in self._files.values())

    def flush(self) -> None:
        """Write the ledger now (blocking)."""
        self.write(self.encode())

    def encode(self) -> bytes:
        """The ledger's bytes (cheap; call on the loop, then ``write`` them in a thread)."""
        files: dict[str, dict[str, object]] = {}
        for path in sorted(set(self._files) | set(self._written)):
            c = self._files.get(path, FileCheckpoint(0, None))
            item: dict[str, object] = {
                "offset": c.offset,
                "state": base64.b64encode(c.state).decode() if c.state else None,
                "verified": c.verified,
            }
            written = self._written.get(path)
            if written is not None:
                item["written"] = {"offset": written[0],
                                   "state": base64.b64encode(written[1]).decode()}
            files[path] = item
        body = {"version": VERSION, "digest": self.digest, "boot": boot_id(), "files": files}
        return json.dumps(body).encode()

    def write(self, data: bytes) -> None:
        """Replace the ledger file with ``data`` atomically (blocking), without waiting for it
        to be durable (``_later``)."""
        disk.write_atomic(self.path, data, fsync=_later)


def _later(fd: int) -> None:
    """No fsync for the ledger itself: every entry it holds already describes fsynced bytes,
    so an older ledger after a power loss only means fetching more again (a torn or empty one
    reads as empty); after a crash of the plugin alone the file is as written. The rename is
    carried to disk by the filesystem's next journal commit, at the latest the next
    checkpoint's fsync. Syncing it too would cost two more journal commits per checkpoint and
    stretch the gap between a checkpoint's bytes and its entry, which is what a restart
    fetches again."""
