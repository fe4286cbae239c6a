"""A Materializer that imports digests from a local directory (tests, air-gapped seeding).

``<import-dir>/<hex>/manifest`` holds the canonical manifest bytes, and the files it lists lie
beside it under their manifest paths. One attempt per digest runs in the background: the manifest's
digest is checked, each file is copied into a fresh ``partial/`` directory while it is hashed
(``hashing.Hasher``: ``sha256``, or the git blob SHA-1 for ``gitsha1`` entries) and its size
counted, and the verified tree is published atomically. Failures go to the same records as the
hub downloader's (``failures.Failures``: 1 min doubling to 1 h, reset by success, kept across
restarts), so mounts answer at once until the retry time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
import pathlib
import threading
import time
from collections.abc import Callable

from nodeplugin.cache import fsutil, layout, publish
from nodeplugin.materialize import failures as failure_records
from nodeplugin.materialize import hashing, interface
from openapi import manifest

log = logging.getLogger(__name__)
CHUNK = 1 << 20


class ImportFailure(interface.AttemptError):
    """A local import's end when it does not publish: ``message`` names no file; ``detail``
    (the file and the cause) goes only to the log."""


@dataclasses.dataclass
class _Attempt:
    digest: str
    received: int = 0
    total: int | None = None
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None
    began: float = dataclasses.field(default_factory=time.monotonic)


class LocalImporter:
    """``interface.Materializer`` over a directory of ``<hex>/manifest`` + files."""

    def __init__(
        self,
        cache: layout.Layout,
        import_dir: str | os.PathLike[str],
        *,
        clock: Callable[[], datetime.datetime] = failure_records.utcnow,
        failures: failure_records.Failures | None = None,
    ) -> None:
        self._cache = cache
        self._dir = pathlib.Path(import_dir)
        self.backoff = failures or failure_records.Failures(cache, clock=clock)
        self._attempts: dict[str, _Attempt] = {}
        self._done = interface.DoneCallbacks()
        self.downloaded_bytes = 0
        """Always 0: an import downloads nothing."""

    async def ensure(self, request: interface.Request) -> interface.Progress:
        digest = request.digest
        if self._cache.is_published(digest):
            return interface.Progress(digest, interface.State.PUBLISHED)
        attempt = self._attempts.get(digest)
        if attempt is None:
            failure = self.backoff.answer(digest)
            if failure is not None:
                return interface.Progress(
                    digest, interface.State.FAILED, reason=failure.reason,
                    message=failure.message, retry_time=failure.retry_time,
                )
            attempt = self._attempts[digest] = _Attempt(digest)
            attempt.task = asyncio.create_task(self._run(attempt), name=f"import {digest}")
        return _progress(attempt)

    def running(self) -> list[interface.Progress]:
        return [_progress(a) for a in self._attempts.values()]

    def add_done_callback(self, callback: interface.DoneCallback) -> None:
        self._done.add(callback)

    async def close(self) -> None:
        tasks = []
        for attempt in self._attempts.values():
            attempt.cancel.set()
            if attempt.task is not None:
                tasks.append(attempt.task)
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, attempt: _Attempt) -> None:
        digest = attempt.digest
        result = interface.State.PUBLISHED.value
        check: interface.Check | None = None
        try:
            await asyncio.to_thread(self._import, attempt)
        except ImportFailure as exc:
            if exc.reason is interface.Reason.CANCELED:
                result = interface.STOPPED  # close() stopped it: nothing to back off from
            else:
                result, check = exc.reason.value, exc.check
                await self._fail(digest, exc.reason, exc.message, exc.detail)
        except Exception as exc:
            result = interface.Reason.SOURCE_UNAVAILABLE.value
            log.exception("importing %s failed", digest)
            await self._fail(digest, interface.Reason.SOURCE_UNAVAILABLE,
                             "the import failed (internal error)", repr(exc))
        else:
            await asyncio.to_thread(self.backoff.clear, digest)
            log.info("imported and published %s", digest)
        finally:
            self._attempts.pop(digest, None)
            self._done.notify(
                interface.Completion(digest, result, time.monotonic() - attempt.began, check)
            )

    async def _fail(
        self, digest: str, reason: interface.Reason, message: str, detail: str
    ) -> None:
        record = await asyncio.to_thread(self.backoff.record, digest, reason, message)
        log.warning("import of %s failed (%s): %s; next attempt after %s",
                    digest, reason.value, detail, record.retry_time)

    # the blocking import (runs in a thread) -----------------------------------------------
    def _import(self, attempt: _Attempt) -> None:
        digest = attempt.digest
        source = self._dir / layout.hex_of(digest)
        try:
            data = (source / "manifest").read_bytes()
        except OSError as exc:
            raise ImportFailure(
                interface.Reason.SOURCE_UNAVAILABLE,
                f"the import directory holds no manifest for this digest ({exc.strerror})",
            ) from exc
        if manifest.digest_of_bytes(data) != digest:
            raise ImportFailure(interface.Reason.INTEGRITY_MISMATCH,
                                "the imported manifest does not hash to the digest",
                                check=interface.Check.MANIFEST)
        try:
            entries = manifest.parse(data)
        except manifest.ManifestError as exc:
            raise ImportFailure(interface.Reason.INTEGRITY_MISMATCH,
                                "the imported manifest is malformed", str(exc),
                                check=interface.Check.MANIFEST) from exc
        interface.refuse_reserved((e.path for e in entries), ImportFailure)
        attempt.total = sum(e.size for e in entries)
        partial = self._cache.new_partial(digest)
        try:
            for entry in entries:
                self._copy(attempt, source / entry.path, partial.path / entry.path, entry)
            publish.publish_tree(self._cache, partial.path, digest, manifest_bytes=data)
        except BaseException:
            fsutil.remove_tree(partial.path)
            raise

    def _copy(
        self, attempt: _Attempt, src: pathlib.Path, dst: pathlib.Path, entry: manifest.Entry
    ) -> None:
        hasher = hashing.Hasher.for_entry(entry)
        dst.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        try:
            with open(src, "rb") as fin, open(dst, "xb") as fout:
                while chunk := fin.read(CHUNK):
                    if attempt.cancel.is_set():
                        raise ImportFailure(interface.Reason.CANCELED, "the plugin is stopping")
                    size += len(chunk)
                    if size > entry.size:
                        break
                    hasher.update(chunk)
                    fout.write(chunk)
                    attempt.received += len(chunk)
        except FileNotFoundError as exc:
            raise ImportFailure(interface.Reason.SOURCE_UNAVAILABLE,
                                "a file of the manifest is missing from the import directory",
                                f"{entry.path}: missing from the import directory") from exc
        if size != entry.size:
            raise ImportFailure(interface.Reason.INTEGRITY_MISMATCH,
                                "a file's size or hash does not match the manifest",
                                f"{entry.path}: size differs from the manifest's {entry.size}",
                                check=interface.Check.SIZE)
        if hasher.hexdigest() != entry.hexdigest:
            raise ImportFailure(interface.Reason.INTEGRITY_MISMATCH,
                                "a file's size or hash does not match the manifest",
                                f"{entry.path}: {entry.algorithm} differs from the manifest",
                                check=interface.Check.HASH)


def _progress(attempt: _Attempt) -> interface.Progress:
    return interface.Progress(
        attempt.digest, interface.State.DOWNLOADING, attempt.received, attempt.total
    )


def write_import(
    import_dir: str | os.PathLike[str],
    files: dict[str, bytes],
    *,
    gitsha1: frozenset[str] = frozenset(),
) -> str:
    """Lay ``files`` out as an importable digest under ``import_dir`` and return the digest.

    Paths in ``gitsha1`` are listed with the git blob SHA-1, the rest with sha256 (as a hub lists
    non-LFS and LFS files). Used to seed air-gapped nodes, and by tests and benchmarks.
    """
    entries = []
    for path, data in files.items():
        algorithm: manifest.Algorithm = "gitsha1" if path in gitsha1 else "sha256"
        hasher = hashing.Hasher.for_file(algorithm, len(data))
        hasher.update(data)
        entries.append(manifest.Entry(path, algorithm, hasher.hexdigest(), len(data)))
    text = manifest.canonical_bytes(entries)
    digest = manifest.digest_of_bytes(text)
    base = pathlib.Path(import_dir) / layout.hex_of(digest)
    base.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        (base / path).parent.mkdir(parents=True, exist_ok=True)
        (base / path).write_bytes(data)
    (base / "manifest").write_bytes(text)
    return digest
