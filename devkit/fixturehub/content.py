"""Deterministic file contents for the fixture hub, generated on the fly.

A synthetic file is a stream of 1 MiB blocks: block ``i`` is a shared random block rotated by an
offset derived from the file's key and ``i``, with a 16-byte keyed header, so every block of every
file differs and a misplaced range never reads back as correct. Multi-GiB files need neither disk
nor RAM. Digests are computed once per (key, size) and cached for the whole test session.

A file can also be a local file (``FileSpec(path=...)``, the command's ``--repo OWNER/NAME=DIR``):
streamed from disk, hashed once; it must not change while served.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pathlib
import random
import threading
from collections.abc import Iterator

BLOCK = 1 << 20
CHUNK = 64 * 1024
_BASE = random.Random(0x6D6D).randbytes(BLOCK)
_TWICE = memoryview(_BASE + _BASE)
"""The base block twice over: any rotation of it is one slice, no copy."""
HEAD = 16
_digest_cache: dict[tuple[bytes, int, str], str] = {}
_digest_lock = threading.Lock()


@dataclasses.dataclass(frozen=True, slots=True)
class FileSpec:
    """How a test describes a file: literal ``content``, ``size`` synthetic bytes, or the local
    file at ``path``.

    ``lfs`` defaults to False for literal content and True for synthetic or local content;
    ``seed`` defaults to the repository id and path, so the same spec gives the same bytes.
    """

    size: int = 0
    content: bytes | None = None
    lfs: bool | None = None
    seed: str | None = None
    path: str | None = None


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
    ).encode()


@functools.lru_cache(maxsize=4096)
def _head(key: bytes, index: int) -> tuple[bytes, int]:
    """Block ``index``'s 16-byte header and where its rotation of the base block starts."""
    head = hashlib.sha256(key + index.to_bytes(8, "big")).digest()
    return head[:HEAD], int.from_bytes(head[:4], "big") % BLOCK


def _block_pieces(key: bytes, index: int, offset: int, stop: int) -> Iterator[memoryview]:
    """Bytes ``offset`` up to ``stop`` of block ``index`` as views (the header, then the
    rotated base block), without copying."""
    head, turn = _head(key, index)
    if offset < HEAD:
        yield memoryview(head)[offset : min(stop, HEAD)]
        offset = HEAD
    if offset < stop:
        yield _TWICE[turn + offset : turn + stop]


class Content:
    """The bytes of one file: literal, a local file (``source``), or synthetic from ``key``."""

    def __init__(
        self, size: int, *, key: bytes, literal: bytes | None = None, source: str | None = None
    ) -> None:
        if source is not None:
            size = os.stat(source).st_size
        self.size = len(literal) if literal is not None else size
        self.key = key
        self._literal = literal
        self._source = source

    def chunks(
        self, start: int = 0, stop: int | None = None, size: int = CHUNK
    ) -> Iterator[bytes | memoryview]:
        """Bytes ``start`` up to ``stop`` (exclusive) in pieces of at most ``size`` bytes.

        Pieces are views into shared buffers (no copy is made to serve them): ``bytes(piece)``
        to keep one.
        """
        stop = self.size if stop is None else min(stop, self.size)
        if self._source is not None:
            yield from _file_chunks(self._source, start, stop, size)
            return
        position = start
        literal = memoryview(self._literal) if self._literal is not None else None
        while position < stop:
            if literal is not None:
                piece: bytes | memoryview = literal[position : min(stop, position + size)]
                yield piece
                position += len(piece)
                continue
            index, offset = divmod(position, BLOCK)
            take = min(stop - position, BLOCK - offset, size)
            for view in _block_pieces(self.key, index, offset, offset + take):
                yield view
                position += len(view)

    def read(self, start: int = 0, stop: int | None = None) -> bytes:
        return b"".join(self.chunks(start, stop))

    def _digest(self, kind: str) -> str:
        if self._literal is not None:
            # hashed each time: cheap, and two literals of one path and size (a file's bytes
            # at two revisions) must not share a digest
            if kind == "sha256":
                return hashlib.sha256(self._literal).hexdigest()
            return git_blob_sha1(self._literal)
        if self._source is not None:
            cache_key = (b"F" + os.fsencode(self._source), self.size, kind)
        else:
            cache_key = (self.key, self.size, kind)
        with _digest_lock:
            known = _digest_cache.get(cache_key)
        if known is not None:
            return known
        hasher = hashlib.sha256() if kind == "sha256" else hashlib.sha1()
        if kind == "gitsha1":
            hasher.update(b"blob %d\x00" % self.size)
        for piece in self.chunks(0, self.size, BLOCK):
            hasher.update(piece)
        value = hasher.hexdigest()
        with _digest_lock:
            _digest_cache[cache_key] = value
        return value

    @property
    def sha256(self) -> str:
        return self._digest("sha256")

    @property
    def gitsha1(self) -> str:
        return self._digest("gitsha1")


def _file_chunks(source: str, start: int, stop: int, size: int) -> Iterator[bytes]:
    with open(source, "rb") as handle:
        position = start
        while position < stop:
            piece = os.pread(handle.fileno(), min(size, stop - position), position)
            if not piece:
                raise OSError(f"{source} is shorter than when it was added")
            yield piece
            position += len(piece)


def make(repo_id: str, path: str, spec: bytes | int | FileSpec) -> tuple[Content, bool]:
    """The content of a test's file spec and whether the hub stores it in LFS."""
    if isinstance(spec, bytes):
        spec = FileSpec(content=spec)
    elif isinstance(spec, int):
        spec = FileSpec(size=spec)
    key = (spec.seed if spec.seed is not None else f"{repo_id}/{path}").encode()
    lfs = spec.lfs if spec.lfs is not None else spec.content is None
    return Content(spec.size, key=key, literal=spec.content, source=spec.path), lfs


LFS_SUFFIXES = frozenset({".bin", ".ckpt", ".gguf", ".h5", ".model", ".msgpack", ".onnx", ".pt",
                          ".pth", ".safetensors", ".tflite"})  # fmt: skip
LFS_SIZE = 10 << 20


def from_directory(directory: pathlib.Path) -> dict[str, FileSpec]:
    """Every regular file under ``directory`` by its relative path, as Hugging Face stores an
    upload: weights (by suffix) and files over 10 MiB in LFS, the rest as regular git files.
    Hidden files and directories (``.git``, ``.cache``) are left out; symlinks are followed."""
    found: dict[str, FileSpec] = {}
    for root, dirs, names in os.walk(directory, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            local = pathlib.Path(root) / name
            if not local.is_file():
                continue
            lfs = local.suffix in LFS_SUFFIXES or local.stat().st_size > LFS_SIZE
            found[local.relative_to(directory).as_posix()] = FileSpec(path=str(local), lfs=lfs)
    return found
