"""The fixture hub's ModelScope routes: commits, revisions, the silently truncated file listing,
and the ``repo?FilePath=`` download."""

from __future__ import annotations

from tests.support.fakehub import handler
from tests.support.fakehub import state as hubstate

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
                "RequestId": "fakehub",
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
                        "CommitterName": "fakehub",
                        "InCheck": False,
                    }
                )
        listed.sort(key=lambda e: str(e["Path"]).encode())
        # ModelScope truncates silently: no marker, no pagination.
        self._ms_envelope(200, 200, {"Files": listed[: self.server.shared.modelscope_limit]})
