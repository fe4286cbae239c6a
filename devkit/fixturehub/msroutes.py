"""The fixture hub's ModelScope routes: commits, revisions, the silently truncated file listing,
the ``repo?FilePath=`` download, the ``users/me`` token check, and git's smart-HTTP ref
advertisement (``<id>.git/info/refs``, what ``git ls-remote`` reads; checked against real git)."""

from __future__ import annotations

import base64
import binascii

from devkit.fixturehub import handler
from devkit.fixturehub import state as hubstate

_NOT_FOUND_CODE = 10010205001
_REVISION_CODE = 10990101004


class ModelScopeRoutes(handler.BaseHandler):
    # --- ModelScope ---------------------------------------------------------------------

    def _ms_envelope(self, status: int, code: int, data: object, message: str = "") -> None:
        self._json(
            status,
            {
                "Code": code,
                "Data": data,
                "Message": message or ("success" if code == 200 else "error"),
                "RequestId": "fixturehub",
                "Success": code == 200,
            },
        )

    def _modelscope(self, segments: list[str], query: dict[str, str]) -> None:
        if len(segments) < 2:
            self._ms_envelope(404, _NOT_FOUND_CODE, None)
            return
        repo_id, rest = f"{segments[0]}/{segments[1]}", segments[2:]
        download = rest == ["repo"]
        if self._status_faults(repo_id, query.get("FilePath") if download else None):
            return
        repo = self._repo(repo_id)
        if repo is None or not repo.authorized(self.headers.get("authorization")):
            self._ms_envelope(404, _NOT_FOUND_CODE, None, "not found")
            return
        if rest == ["commits"]:
            commit = repo.resolve(query.get("Ref", ""))
            commits = [] if commit is None else [{"Id": commit, "Message": "fixture"}]
            self._ms_envelope(200, 200, {"Commit": commits, "TotalCount": len(commits)})
            return
        if rest == ["revisions"]:
            branches = [{"Revision": name, "CreatedAt": 0} for name in sorted(repo.refs)]
            self._ms_envelope(200, 200, {"RevisionMap": {"Branches": branches, "Tags": []}})
            return
        commit = repo.resolve(query.get("Revision", "master"))
        if commit is None:
            self._ms_envelope(404, _REVISION_CODE, None, "revision not found")
            return
        if rest == ["repo", "files"]:
            self._ms_files(repo, commit, query)
        elif download:
            remote = repo.files.get(query.get("FilePath", ""))
            if remote is None:
                self._ms_envelope(404, _NOT_FOUND_CODE, None, "file not found")
                return
            self._serve_file(repo, remote, {"etag": f'"{remote.sha256}"'})
        elif not rest:
            self._ms_envelope(200, 200, {"Id": repo_id, "Revision": commit})
        else:
            self._ms_envelope(404, _NOT_FOUND_CODE, None)

    def _ms_files(self, repo: hubstate.Repo, commit: str, query: dict[str, str]) -> None:
        root = query.get("Root", "").strip("/")
        recursive = query.get("Recursive", "False").lower() == "true"
        prefix = root + "/" if root else ""

        def wanted(path: str) -> bool:
            return path.startswith(prefix) and (recursive or "/" not in path[len(prefix) :])

        listed: list[dict[str, object]] = []
        for directory in repo.directories():
            if wanted(directory):
                listed.append(
                    {"Name": directory.rsplit("/", 1)[-1], "Path": directory, "Type": "tree",
                     "Size": 0, "Revision": commit}
                )
        for path, remote in repo.files.items():
            if wanted(path):
                listed.append(
                    {
                        "Name": path.rsplit("/", 1)[-1],
                        "Path": path,
                        "Type": "blob",
                        "Size": remote.content.size,
                        "Sha256": remote.sha256,
                        "IsLFS": remote.lfs,
                        "Mode": "33188",
                        "Revision": commit,
                        "CommitMessage": "fixture",
                        "CommittedDate": 0,
                        "CommitterName": "fixturehub",
                        "InCheck": False,
                    }
                )
        listed.sort(key=lambda e: str(e["Path"]).encode())
        # ModelScope truncates silently: no marker, no pagination.
        self._ms_envelope(200, 200, {"Files": listed[: self.server.shared.modelscope_limit]})

    # --- users/me and git ---------------------------------------------------------------

    def _users_me(self) -> None:
        scheme, _, token = (self.headers.get("authorization") or "").partition(" ")
        shared = self.server.shared
        with shared.lock:
            known = set(shared.user_tokens)
            known.update(r.private_token for r in shared.repos.values() if r.private_token)
        if scheme.lower() == "bearer" and token and token in known:
            self._json(200, {"success": True, "data": {"username": "fixture", "email": "",
                                                        "nickname": "fixture"}})
            return
        self._json(401, {"success": False, "code": "InvalidAuthentication",
                         "message": "Invalid authentication: missing or invalid Authorization "
                                    "header"})

    def _basic_password(self) -> str | None:
        scheme, _, value = (self.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(value.strip()).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password if user == "oauth2" else None

    def _git_refs(self, repo_id: str, query: dict[str, str]) -> None:
        if self._status_faults(repo_id, None):
            return
        if query.get("service") != "git-upload-pack":
            self._json(403, {"error": "only the smart protocol is served"})
            return
        repo = self._repo(repo_id)
        if repo is not None and repo.private_token is not None and (
                self._basic_password() != repo.private_token):
            self.send_response(401)
            self.send_header("www-authenticate", 'Basic realm="ModelScope"')
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if repo is None:
            self._json(404, {"error": "repository not found"})
            return

        def pkt(data: bytes) -> bytes:
            return b"%04x" % (len(data) + 4) + data

        body = bytearray(pkt(b"# service=git-upload-pack\n") + b"0000")
        for index, (sha, name) in enumerate(repo.git_refs()):
            line = f"{sha} {name}".encode()
            if index == 0:
                line += b"\0multi_ack thin-pack side-band side-band-64k ofs-delta shallow " \
                        b"no-progress include-tag agent=git/fixturehub"
            body += pkt(line + b"\n")
        body += b"0000"
        self.send_response(200)
        self.send_header("content-type", "application/x-git-upload-pack-advertisement")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(bytes(body))
