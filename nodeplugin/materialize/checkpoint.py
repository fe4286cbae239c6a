"""An attempt's resume ledger: per file, how many bytes are durable and the hash state there.

The ledger is the partial directory's ``RESUMABLE`` file (``layout.RESUMABLE``), so its presence
also tells the plugin at start that the directory belongs to a resumable attempt. An entry is only
ever updated after the file's bytes up to its offset were fsynced, and the ledger itself is
replaced atomically, so after a crash every entry describes bytes that are on disk: the file is
truncated to the entry's offset and hashing continues from the saved state.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import pathlib

from durable import disk
from nodeplugin.cache import layout

log = logging.getLogger(__name__)

VERSION = 1


@dataclasses.dataclass(frozen=True, slots=True)
class FileCheckpoint:
    offset: int
    """Bytes of the file that are durable and hashed."""
    state: bytes | None
    """``hashing.Hasher.save()`` at ``offset``; None once ``verified``."""
    verified: bool = False
    """The whole file was received and matched its size and hash."""


class Ledger:
    """The in-memory copy of one partial directory's ledger; ``flush`` writes it (blocking)."""

    def __init__(self, partial_dir: pathlib.Path, digest: str) -> None:
        self.path = partial_dir / layout.RESUMABLE
        self.digest = digest
        self._files: dict[str, FileCheckpoint] = {}
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
            for path, item in body["files"].items():
                state = base64.b64decode(item["state"]) if item.get("state") else None
                ledger._files[str(path)] = FileCheckpoint(
                    int(item["offset"]), state, bool(item.get("verified", False))
                )
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable resume ledger in %s: %s", partial_dir.name, exc)
            ledger._files.clear()
        return ledger

    def get(self, path: str) -> FileCheckpoint | None:
        return self._files.get(path)

    def put(self, path: str, checkpoint: FileCheckpoint) -> None:
        self._files[path] = checkpoint
        self.version += 1

    def discard(self, path: str) -> None:
        self._files.pop(path, None)
        self.version += 1

    def keep_only(self, paths: set[str]) -> None:
        """Forget entries for files the manifest does not name."""
        for path in list(self._files):
            if path not in paths:
                del self._files[path]
                self.version += 1

    def held_bytes(self) -> int:
        return sum(c.offset for c in self._files.values())

    def flush(self) -> None:
        """Write the ledger now (blocking)."""
        self.write(self.encode())

    def encode(self) -> bytes:
        """The ledger's bytes (cheap; call on the loop, then ``write`` them in a thread)."""
        files = {
            path: {
                "offset": c.offset,
                "state": base64.b64encode(c.state).decode() if c.state else None,
                "verified": c.verified,
            }
            for path, c in sorted(self._files.items())
        }
        body = {"version": VERSION, "digest": self.digest, "files": files}
        return json.dumps(body).encode()

    def write(self, data: bytes) -> None:
        """Replace the ledger file with ``data`` atomically (blocking)."""
        disk.write_atomic(self.path, data)
