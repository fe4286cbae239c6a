"""Static bearer tokens from a CSV file, like kube-apiserver's ``--token-auth-file``.

Each line is ``token,user,uid,"group1,group2"`` (the groups column is optional), plus an optional
fifth column of this project: the user's extra, as URL-query pairs
(``authentication.kubernetes.io/pod-name=plugin-0&authentication.kubernetes.io/node-name=n1``,
percent-encoded, a key repeated for several values). kube-apiserver ignores columns past the
fourth, so the file stays readable by it. Tokens are kept only as SHA-256 digests in memory, so a
dump of the table reveals nothing usable.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import pathlib
import secrets
import urllib.parse
from collections.abc import Iterable

from apiserver.auth import user
from durable import disk


class TokenFileError(ValueError):
    """The token file is malformed; the message names the line, never the token."""


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    token: str = dataclasses.field(repr=False)
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = ()
    """(key, value) pairs, in file order."""

    def extra_map(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for key, value in self.extra:
            out.setdefault(key, []).append(value)
        return {k: tuple(v) for k, v in out.items()}


class TokenTable:
    """Maps a bearer token to its user; ``system:authenticated`` is added to every user."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._users: dict[bytes, user.UserInfo] = {}
        for entry in entries:
            groups = tuple(dict.fromkeys([*entry.groups, user.AUTHENTICATED]))
            info = user.UserInfo(name=entry.name, uid=entry.uid, groups=groups,
                                 extra=entry.extra_map())
            self._users[_digest(entry.token)] = info

    def __len__(self) -> int:
        return len(self._users)

    def find(self, token: str) -> user.UserInfo | None:
        return self._users.get(_digest(token))


def parse(text: str, *, source: str = "token file") -> list[Entry]:
    entries: list[Entry] = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 2 or not row[0].strip() or not row[1].strip():
            raise TokenFileError(f"{source} line {number}: expected token,user[,uid[,groups]]")
        uid = row[2].strip() if len(row) > 2 else ""
        groups: tuple[str, ...] = ()
        if len(row) > 3:
            groups = tuple(g.strip() for g in row[3].split(",") if g.strip())
        extra: tuple[tuple[str, str], ...] = ()
        if len(row) > 4 and row[4].strip():
            try:
                extra = tuple(urllib.parse.parse_qsl(row[4].strip(), keep_blank_values=True,
                                                     strict_parsing=True))
            except ValueError:
                raise TokenFileError(f"{source} line {number}: the extra column must be "
                                     "key=value pairs joined by '&'") from None
        entries.append(Entry(token=row[0].strip(), name=row[1].strip(), uid=uid, groups=groups,
                             extra=extra))
    return entries


def load(path: pathlib.Path) -> TokenTable:
    return TokenTable(parse(path.read_text(), source=str(path)))


def render(entries: Iterable[Entry]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    for entry in entries:
        row = [entry.token, entry.name, entry.uid, ",".join(entry.groups)]
        if entry.extra:
            row.append(urllib.parse.urlencode(entry.extra, safe="/"))
        writer.writerow(row)
    return out.getvalue()


def write(path: pathlib.Path, entries: Iterable[Entry]) -> None:
    """Write the file atomically, readable by its owner only."""
    disk.write_atomic(path, render(entries).encode())


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
