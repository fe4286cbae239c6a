"""The fixture hub's Hugging Face routes: revision, paginated tree, resolve (a 302 to the CDN for
LFS files, with the ``X-Linked-*`` headers) and the CDN itself."""

from __future__ import annotations

import hashlib
from urllib import parse

from devkit.fixturehub import content, handler
from devkit.fixturehub import state as hubstate


class HuggingFaceRoutes(handler.BaseHandler):
    def _hf_error(self, status: int, code: str, message: str = "") -> None:
        headers = {"x-error-code": code}
        if message:
            headers["x-error-message"] = message
        self._json(status, {"error": message or code}, headers)

    # --- Hugging Face -------------------------------------------------------------------

    def _hf_repo(self, repo_id: str, *, listing: bool) -> hubstate.Repo | None:
        """The repository if this caller may see it; otherwise answers like the Hub and None."""
        repo = self._repo(repo_id)
        authorization = self.headers.get("authorization")
        if repo is None or (not repo.authorized(authorization) and not repo.gated):
            self._hf_error(401 if authorization is None else 404, "RepoNotFound")
            return None
        if not repo.authorized(authorization) and not listing:
            self._hf_error(401 if authorization is None else 403, "GatedRepo")
            return None
        return repo

    def _hf_api(self, segments: list[str], query: dict[str, str]) -> None:
        if len(segments) < 4:
            self._json(404, {"error": "not found"})
            return
        repo_id, kind, revision = f"{segments[0]}/{segments[1]}", segments[2], segments[3]
        if kind == "resolve":
            self._hf_resolve(repo_id, revision, segments[4:])
            return
        if self._status_faults(repo_id, None):
            return
        repo = self._hf_repo(repo_id, listing=True)
        if repo is None:
            return
        commit = repo.resolve(revision)
        if commit is None:
            self._hf_error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        if kind == "revision":
            self._json(200, self._model_info(repo, commit))
        elif kind == "tree":
            self._hf_tree(repo, revision, commit, "/".join(segments[4:]), query)
        else:
            self._json(404, {"error": "not found"})

    def _model_info(self, repo: hubstate.Repo, commit: str) -> dict[str, object]:
        siblings: list[dict[str, object]] = []
        for path, remote in sorted(repo.files_at(commit).items()):
            size = remote.content.size
            sibling: dict[str, object] = {"rfilename": path, "size": size, "blobId": remote.oid}
            if remote.lfs:
                pointer = content.lfs_pointer(remote.sha256, size)
                sibling["lfs"] = {
                    "sha256": remote.sha256, "size": size, "pointerSize": len(pointer)
                }
            siblings.append(sibling)
        return {
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": commit,
            "private": repo.private_token is not None,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "lastModified": "2026-01-01T00:00:00.000Z",
            "siblings": siblings,
        }

    def _hf_tree(
        self, repo: hubstate.Repo, revision: str, commit: str, root: str, query: dict[str, str]
    ) -> None:
        recursive = query.get("recursive", "false").lower() == "true"
        masked = not repo.authorized(self.headers.get("authorization"))
        entries: list[dict[str, object]] = []
        prefix = root + "/" if root else ""

        def wanted(path: str) -> bool:
            if not path.startswith(prefix):
                return False
            return recursive or "/" not in path[len(prefix) :]

        for directory in repo.directories(commit):
            if wanted(directory):
                oid = hashlib.sha1(directory.encode()).hexdigest()
                entries.append({"type": "directory", "oid": oid, "size": 0, "path": directory})
        for path, remote in repo.files_at(commit).items():
            if not wanted(path):
                continue
            entry: dict[str, object] = {
                "type": "file",
                "oid": remote.oid,
                "size": remote.content.size,
                "path": path,
            }
            if remote.lfs:
                entry["lfs"] = {
                    "oid": "*" * 64 if masked else remote.sha256,
                    "size": remote.content.size,
                    "pointerSize": len(
                        content.lfs_pointer(remote.sha256, remote.content.size)
                    ),
                }
            entries.append(entry)
        entries.sort(key=lambda e: str(e["path"]).encode())
        cursor = int(query.get("cursor", "0") or 0)
        page = entries[cursor : cursor + repo.tree_page_size]
        headers: dict[str, str] = {}
        if cursor + repo.tree_page_size < len(entries):
            next_query = dict(query, cursor=str(cursor + repo.tree_page_size))
            path = parse.quote(revision, safe="")
            if root:
                path += "/" + parse.quote(root, safe="")
            url = (
                f"{self.server.endpoint}/api/models/{repo.repo_id}/tree/{path}"
                f"?{parse.urlencode(next_query)}"
            )
            headers["link"] = f'<{url}>; rel="next"'
        self._json(200, page, headers)

    def _hf_resolve(self, repo_id: str, revision: str, path_segments: list[str]) -> None:
        path = "/".join(path_segments)
        if self._status_faults(repo_id, path):
            return
        repo = self._hf_repo(repo_id, listing=False)
        if repo is None:
            return
        commit = repo.resolve(revision)
        if commit is None:
            self._hf_error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        remote = repo.files_at(commit).get(path)
        if remote is None:
            self._hf_error(404, "EntryNotFound", f"{path} does not exist on {revision}",)
            return
        if remote.lfs and self.server.peer is not None:
            size = remote.content.size
            location = (
                f"{self.server.peer.endpoint}/cdn/{repo_id}/{commit}/{parse.quote(path)}"
                f"?X-Amz-Signature=fakesignature{commit[:12]}&Expires=9999999999"
            )
            self.send_response(302)
            self.send_header("location", location)
            self.send_header("x-repo-commit", commit)
            self.send_header("etag", f'"{remote.sha256}"')
            self.send_header("x-linked-etag", f'"{remote.sha256}"')
            self.send_header("x-linked-size", str(size))
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self._serve_file(repo, remote, {"x-repo-commit": commit, "etag": f'"{remote.etag}"'})

    # --- the CDN ------------------------------------------------------------------------

    def _cdn(self, segments: list[str]) -> None:
        if len(segments) < 5 or segments[0] != "cdn":
            self._json(404, {"error": "not found"})
            return
        repo_id, commit, path = f"{segments[1]}/{segments[2]}", segments[3], "/".join(segments[4:])
        if self._status_faults(repo_id, path):
            return
        repo = self._repo(repo_id)
        remote = repo.files_at(commit).get(path) if repo is not None else None
        if repo is None or remote is None:
            self._json(403, {"error": "signature does not match"})
            return
        self._serve_file(repo, remote, {"etag": f'"{remote.sha256}"'})
