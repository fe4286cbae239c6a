"""Hashes whose running state can be saved and restored, so a resumed file never re-reads its bytes.

Python's ``hashlib`` cannot export a running state. OpenSSL's low-level ``SHA256_CTX``/``SHA_CTX``
are plain structs, so this module drives ``SHA256_Init/Update/Final`` and ``SHA1_*`` of the system
``libcrypto`` through ctypes and copies the struct out as the saved state. The calls run the same
OpenSSL code ``hashlib`` does, and ctypes releases the GIL during each call, so hashing a large
buffer in a worker thread does not hold up the event loop.

A file's hasher is made from its manifest entry: ``sha256`` hashes the content, ``gitsha1`` hashes
git's ``blob <size>\\0`` header first (``openapi.manifest.git_blob_sha1_prefix``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib

from openapi import manifest

# Struct sizes of OpenSSL's SHA256_CTX and SHA_CTX (stable across 1.0, 1.1 and 3.x).
_CTX_SIZE: dict[str, int] = {"sha256": 112, "gitsha1": 96}
_DIGEST_SIZE: dict[str, int] = {"sha256": 32, "gitsha1": 20}
_SYMBOLS: dict[str, str] = {"sha256": "SHA256", "gitsha1": "SHA1"}
_STATE_MAGIC = b"mmh1"


class HashStateError(ValueError):
    """A saved state that does not belong to this algorithm or this library."""


class _Functions:
    def __init__(self, lib: ctypes.CDLL, prefix: str, version: int) -> None:
        self.version = version
        self.init = getattr(lib, f"{prefix}_Init")
        self.update = getattr(lib, f"{prefix}_Update")
        self.final = getattr(lib, f"{prefix}_Final")
        self.init.argtypes = [ctypes.c_void_p]
        self.init.restype = ctypes.c_int
        self.update.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self.update.restype = ctypes.c_int
        self.final.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        self.final.restype = ctypes.c_int


@functools.cache
def _library() -> dict[str, _Functions] | None:
    name = ctypes.util.find_library("crypto")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        version_num = lib.OpenSSL_version_num
        version_num.restype = ctypes.c_ulong
        version_num.argtypes = []
        version = int(version_num())
        return {alg: _Functions(lib, sym, version) for alg, sym in _SYMBOLS.items()}
    except (OSError, AttributeError):
        return None


def _prefix(algorithm: str, version: int) -> bytes:
    return _STATE_MAGIC + b"%s:%x:" % (algorithm.encode(), version)


def resumable() -> bool:
    """True when the system libcrypto is usable, so hash states can be saved."""
    return _library() is not None


class Hasher:
    """One file's running hash: ``update`` in byte order, ``save`` at a checkpoint, ``hexdigest``.

    Without libcrypto it falls back to ``hashlib`` and ``save`` returns None (a restart then
    starts that file again).
    """

    def __init__(self, algorithm: manifest.Algorithm, *, _state: bytes | None = None) -> None:
        self.algorithm: manifest.Algorithm = algorithm
        functions = _library()
        self._fallback: hashlib._Hash | None = None
        self._ctx: ctypes.Array[ctypes.c_char] | None = None
        if functions is None:
            if _state is not None:
                raise HashStateError("saved hash states need the system libcrypto")
            self._fallback = hashlib.sha256() if algorithm == "sha256" else hashlib.sha1()
            return
        self._fn = functions[algorithm]
        self._ctx = ctypes.create_string_buffer(_CTX_SIZE[algorithm])
        if _state is None:
            if self._fn.init(self._ctx) != 1:
                raise RuntimeError(f"{algorithm} init failed")
        else:
            ctypes.memmove(self._ctx, _state, len(_state))

    @classmethod
    def for_entry(cls, entry: manifest.Entry) -> Hasher:
        """A fresh hasher for a manifest entry, git's blob header already fed for ``gitsha1``."""
        return cls.for_file(entry.algorithm, entry.size)

    @classmethod
    def for_file(cls, algorithm: manifest.Algorithm, size: int) -> Hasher:
        """A fresh hasher for a file of ``size`` bytes listed with ``algorithm``."""
        hasher = cls(algorithm)
        if algorithm == "gitsha1":
            hasher.update(manifest.git_blob_sha1_prefix(size))
        return hasher

    def update(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes; a writable buffer (a receive buffer) is hashed in place, not copied."""
        if self._fallback is not None:
            self._fallback.update(data)
            return
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        pointer: bytes | ctypes.Array[ctypes.c_char] = (
            data if isinstance(data, bytes) else (ctypes.c_char * size).from_buffer(data)
        )
        if self._fn.update(self._ctx, pointer, size) != 1:
            raise RuntimeError(f"{self.algorithm} update failed")

    def save(self) -> bytes | None:
        """The running state as bytes (None without libcrypto)."""
        if self._ctx is None:
            return None
        return _prefix(self.algorithm, self._fn.version) + self._ctx.raw

    @classmethod
    def restore(cls, algorithm: manifest.Algorithm, state: bytes) -> Hasher:
        """A hasher continuing from ``save()``'s bytes.

        The state names the libcrypto version that wrote it: a struct from another version is
        refused rather than trusted (the file then starts again).
        """
        functions = _library()
        if functions is None:
            raise HashStateError("saved hash states need the system libcrypto")
        prefix = _prefix(algorithm, functions[algorithm].version)
        raw = state[len(prefix) :]
        if not state.startswith(prefix) or len(raw) != _CTX_SIZE[algorithm]:
            raise HashStateError(f"not a saved {algorithm} state of this libcrypto")
        return cls(algorithm, _state=raw)

    def hexdigest(self) -> str:
        """The digest of everything fed so far; the hasher stays usable (it finalizes a copy)."""
        if self._fallback is not None:
            return self._fallback.hexdigest()
        assert self._ctx is not None
        copy = ctypes.create_string_buffer(self._ctx.raw, len(self._ctx))
        out = ctypes.create_string_buffer(_DIGEST_SIZE[self.algorithm])
        if self._fn.final(out, copy) != 1:
            raise RuntimeError(f"{self.algorithm} final failed")
        return out.raw.hex()
