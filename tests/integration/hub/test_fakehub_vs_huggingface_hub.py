"""The fixture hub checked against the real ``huggingface_hub`` client: what it downloads and lists
is exactly what the fixture serves (the ``hub`` clients are checked against the fixture in
``test_hub_clients_vs_fakehub.py``)."""

from __future__ import annotations

import hashlib
import pathlib
from collections.abc import Iterator

import huggingface_hub
import pytest

from devkit import fixturehub

pytestmark = pytest.mark.integration

REPO = "org/tiny-model"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["Tiny"]}\n',
    "README.md": b"# tiny\n",
    "model.safetensors": 3 * 1024 * 1024 + 17,
    "sub/dir/weights.bin": 200_000,
    "sub/tokenizer.json": fixturehub.FileSpec(content=b'{"v": 1}', lfs=True),
}


@pytest.fixture
def hub_server() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, FILES, tree_page_size=2)
        yield running


def test_snapshot_download_is_byte_identical(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    folder = huggingface_hub.snapshot_download(
        REPO,
        revision="main",
        endpoint=hub_server.endpoint,
        cache_dir=tmp_path / "cache",
        token=False,
    )
    root = pathlib.Path(folder)
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert found == sorted(FILES)
    for path in FILES:
        assert (root / path).read_bytes() == hub_server.content(REPO, path).read()
    assert hub_server.repo(REPO).commit in folder
    # LFS bodies came from the CDN, regular files from the hub itself.
    assert hub_server.requests(f"/cdn/{REPO}/{hub_server.repo(REPO).commit}/model.safetensors")


def test_an_earlier_revision_is_still_served_by_its_commit(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``add_revision``: a new head whose unchanged files are the same bytes, while the first
    commit keeps its own files (what the revision-delta tests and benchmark serve)."""
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    first = hub_server.repo(REPO).commit
    second_files = {**FILES, "config.json": b'{"architectures": ["Tinier"]}\n', "NEW.md": b"new"}
    del second_files["README.md"]
    second = hub_server.add_revision(REPO, second_files).commit
    assert second != first
    for commit, files in ((first, FILES), (second, second_files)):
        folder = pathlib.Path(huggingface_hub.snapshot_download(
            REPO, revision=commit, endpoint=hub_server.endpoint, cache_dir=tmp_path / "cache",
            token=False))
        found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        assert found == sorted(files), commit
        for path in files:
            assert (folder / path).read_bytes() == hub_server.content(REPO, path, commit).read()
    assert hub_server.content(REPO, "config.json", first).read() == FILES["config.json"]
    unchanged = hub_server.content(REPO, "model.safetensors", first)
    assert unchanged.read() == hub_server.content(REPO, "model.safetensors").read()
    api = huggingface_hub.HfApi(endpoint=hub_server.endpoint, token=False)
    assert api.model_info(REPO, revision="main").sha == second
    # a file's new bytes of the same size at a third commit: its own blob id in the listing
    same_size = second_files["config.json"].replace(b"Tinier", b"Tinies")
    third = hub_server.add_revision(REPO, {**second_files, "config.json": same_size}).commit
    listed = {e.path: e.blob_id for e in api.list_repo_tree(REPO, revision=third)
              if e.path == "config.json"}  # fmt: skip
    before = {e.path: e.blob_id for e in api.list_repo_tree(REPO, revision=second)
              if e.path == "config.json"}  # fmt: skip
    blob = hashlib.sha1(b"blob %d\x00" % len(same_size) + same_size, usedforsecurity=False)
    assert listed["config.json"] == blob.hexdigest() != before["config.json"]


def test_list_repo_tree_lists_what_the_fixture_serves(hub_server: fixturehub.Hub) -> None:
    api = huggingface_hub.HfApi(endpoint=hub_server.endpoint, token=False)
    entries = list(api.list_repo_tree(REPO, recursive=True))
    files = {e.path: e for e in entries if isinstance(e, huggingface_hub.hf_api.RepoFile)}
    folders = {e.path for e in entries if isinstance(e, huggingface_hub.hf_api.RepoFolder)}
    assert set(files) == set(FILES)
    assert folders == {"sub", "sub/dir"}
    for path, entry in files.items():
        data = hub_server.content(REPO, path)
        assert entry.size == data.size
        if entry.lfs is not None:
            assert entry.lfs.sha256 == data.sha256
        else:
            assert entry.blob_id == data.gitsha1


def test_private_download_with_a_token(
    hub_server: fixturehub.Hub, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub_server.add_repo("org/private", {"w.bin": 100_000}, private_token="hf_secret")
    with pytest.raises(huggingface_hub.errors.RepositoryNotFoundError):
        huggingface_hub.hf_hub_download(
            "org/private", "w.bin", endpoint=hub_server.endpoint, cache_dir=tmp_path, token=False
        )
    path = huggingface_hub.hf_hub_download(
        "org/private", "w.bin", endpoint=hub_server.endpoint, cache_dir=tmp_path,
        token="hf_secret",
    )
    assert pathlib.Path(path).read_bytes() == hub_server.content("org/private", "w.bin").read()
    assert "Bearer hf_secret" in hub_server.authorizations(hub_server.hub_netloc)
    assert set(hub_server.authorizations(hub_server.cdn_netloc)) == {None}
