"""The fixture hub's repositories, fault switches and counters (shared by its server threads)."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
import time
from collections.abc import Mapping

from devkit.fixturehub import content


@dataclasses.dataclass
class Faults:
    """Runtime fault switches for a repository (``path=None``) or one of its files.

    Offsets are absolute file offsets. ``*_times`` counts the responses a fault still applies
    to (None = every response). Status faults (``fail_times``, ``rate_limit_times``) apply to
    any request of the repository for a repository-wide entry, and to the file's download
    requests (resolve, CDN, ModelScope) for a per-file entry.
    """

    fail_times: int = 0
    fail_status: int = 503
    # With a code, the failure's body is a ModelScope envelope carrying it (e.g. 10010200001).
    fail_code: int | None = None
    # With a code, the failure also carries ``X-Error-Code`` (the Hub's ``EntryNotFound``...).
    fail_error_code: str | None = None
    # With a count, a per-file status fault fires only once that many of the file's bytes
    # were served: a file that goes missing in the middle of its download.
    fail_after_bytes: int | None = None
    rate_limit_times: int = 0
    retry_after: int = 1
    # When set, 429s carry ``RateLimit: "api";r=0;t=<ratelimit_reset>`` instead of Retry-After.
    ratelimit_reset: int | None = None
    stall_at: int | None = None
    stall_seconds: float | None = None  # None: stall until the client gives up or the hub stops
    # When set, a stall also ends as soon as this is set (a test releases it at the moment it
    # chose, so the stall's length does not depend on the machine's speed).
    stall_until: threading.Event | None = None
    stall_times: int | None = 1
    reset_at: int | None = None
    reset_times: int | None = 1
    truncate_at: int | None = None
    truncate_times: int | None = 1
    corrupt_at: int | None = None
    rate: float | None = None  # bytes per second, per response


@dataclasses.dataclass
class RemoteFile:
    path: str
    content: content.Content
    lfs: bool

    @property
    def sha256(self) -> str:
        return self.content.sha256

    @property
    def oid(self) -> str:
        """The tree ``oid``: the git blob id of the file as committed (the pointer, for LFS)."""
        if self.lfs:
            return content.git_blob_sha1(content.lfs_pointer(self.sha256, self.content.size))
        return self.content.gitsha1

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.content.gitsha1


def tag_object(name: str, commit: str) -> str:
    """The id of the (fixture's) annotated tag object ``name`` pointing at ``commit``."""
    return hashlib.sha1(f"tag {name}\nobject {commit}".encode()).hexdigest()


@dataclasses.dataclass
class Repo:
    repo_id: str
    files: dict[str, RemoteFile]
    commit: str
    refs: dict[str, str]
    """Branches: name -> commit."""
    private_token: str | None = None
    gated: bool = False
    tree_page_size: int = 1000
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    """Lightweight tags: name -> commit."""
    annotated_tags: dict[str, str] = dataclasses.field(default_factory=dict)
    """Annotated tags: name -> the commit they peel to (git advertises the tag object too)."""
    git_refs_override: dict[str, str] = dataclasses.field(default_factory=dict)
    """refname -> sha git advertises instead of the truth (to make the index and git disagree)."""
    older: dict[str, dict[str, RemoteFile]] = dataclasses.field(default_factory=dict)
    """Earlier commits (``Hub.add_revision``) and their files, still served by commit."""

    def files_at(self, commit: str) -> dict[str, RemoteFile]:
        """The files of ``commit`` (the head's, or an earlier revision's)."""
        return self.files if commit == self.commit else self.older.get(commit, {})

    def resolve(self, revision: str) -> str | None:
        if revision == self.commit or revision in self.older:
            return revision
        for table in (self.refs, self.tags, self.annotated_tags):
            if revision in table:
                return table[revision]
        return None

    def git_refs(self) -> list[tuple[str, str]]:
        """(sha, refname) as ``git ls-remote`` lists them: HEAD, then sorted refs, each
        annotated tag followed by its peeled ``^{}`` line."""
        refs: list[tuple[str, str]] = []
        head = self.refs.get("main") or self.refs.get("master")
        if head is not None:
            refs.append((head, "HEAD"))
        named: dict[str, str] = {f"refs/heads/{b}": c for b, c in self.refs.items()}
        named.update({f"refs/tags/{t}": c for t, c in self.tags.items()})
        named.update({f"refs/tags/{t}": tag_object(t, c) for t, c in self.annotated_tags.items()})
        for name in sorted(named):
            refs.append((self.git_refs_override.get(name, named[name]), name))
            tag = name.removeprefix("refs/tags/")
            if name.startswith("refs/tags/") and tag in self.annotated_tags:
                peeled = name + "^{}"
                refs.append((self.git_refs_override.get(peeled, self.annotated_tags[tag]),
                             peeled))
        return refs

    def directories(self, commit: str | None = None) -> list[str]:
        found: set[str] = set()
        for path in self.files_at(commit or self.commit):
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                found.add("/".join(parts[:i]))
        return sorted(found)

    def authorized(self, authorization: str | None) -> bool:
        if self.private_token is None and not self.gated:
            return True
        return self.private_token is not None and authorization == f"Bearer {self.private_token}"


def default_commit(repo_id: str, files: Mapping[str, object]) -> str:
    return hashlib.sha1(f"{repo_id}\n{sorted(files)}".encode()).hexdigest()


class State:
    """Everything the two servers share; every mutation holds ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.repos: dict[str, Repo] = {}
        self.faults: dict[tuple[str, str | None], Faults] = {}
        self.modelscope_limit = 3000
        self.user_tokens: set[str] = set()
        self.reset_counters()

    def reset_counters(self) -> None:
        with getattr(self, "lock", threading.Lock()):
            self.requests: collections.Counter[str] = collections.Counter()
            self.file_requests: collections.Counter[tuple[str, str]] = collections.Counter()
            self.bytes_served: collections.Counter[tuple[str, str]] = collections.Counter()
            self.timeline: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
            self.ranges: list[tuple[str, str, int, int]] = []
            self.authorizations: dict[str, list[str | None]] = collections.defaultdict(list)
            self.open_requests = 0
            self.max_open_requests = 0
            self.open_downloads = 0
            self.max_open_downloads = 0

    def served(self, key: tuple[str, str], count: int) -> None:
        """Count ``count`` bytes of ``key`` (repo, path) sent; the caller holds ``lock``. The
        repository's timeline gets (monotonic time, bytes of the repository so far)."""
        self.bytes_served[key] += count
        line = self.timeline[key[0]]
        line.append((time.monotonic(), (line[-1][1] if line else 0) + count))

    def fault(self, repo_id: str, path: str | None) -> Faults | None:
        with self.lock:
            return self.faults.get((repo_id, path))

    def take(self, faults: Faults, name: str) -> bool:
        """Whether the fault ``name`` fires for this response, consuming one of its uses."""
        with self.lock:
            times = getattr(faults, f"{name}_times")
            if name in ("fail", "rate_limit"):
                if times <= 0:
                    return False
                setattr(faults, f"{name}_times", times - 1)
                return True
            if getattr(faults, f"{name}_at") is None:
                return False
            if times is None:
                return True
            if times <= 0:
                return False
            setattr(faults, f"{name}_times", times - 1)
            return True
