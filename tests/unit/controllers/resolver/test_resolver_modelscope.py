"""The resolver against the fixture hub's ModelScope side: every row of its answer table, the
git cross-check (annotated tags peeled, a disagreement refused), the 3000-entry truncation
re-listed per directory, and the new-token check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devkit.fixturehub import state
from tests.unit.controllers.conftest import Harness

REPO = "qwen/model"
TOKEN = "ms_unit_secret_token_1"
FILES: dict[str, Any] = {"configuration.json": b"{}", "model.safetensors": 4000,
                         "sub/a.bin": 10, "sub/b.bin": 11}


def ms(repo: str = REPO, revision: str | None = None, secret: str | None = None,
       **spec: Any) -> dict[str, Any]:
    member: dict[str, Any] = {"repository": repo}
    if revision is not None:
        member["revision"] = revision
    if secret is not None:
        member["secretRef"] = {"name": secret}
    return {"source": {"modelScope": member}, **spec}


async def test_a_branch_resolves_after_git_agrees(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("m", ms())
    await harness.reconcile("m")
    resolved = (await harness.status("m"))["resolved"]
    assert resolved["revision"] == harness.hub.repo(REPO).commit
    assert resolved["fileCount"] == 4 and resolved["digestSource"] == "Hub"
    assert harness.hub.requests(f"/{REPO}.git/info/refs") == 1
    assert harness.hub.requests(f"/api/v1/models/{REPO}/commits") == 1


async def test_an_annotated_tag_is_checked_against_its_peeled_commit(harness: Harness) -> None:
    commit = "d" * 40
    harness.hub.add_repo(REPO, FILES, commit=commit, annotated_tags={"v2": commit})
    await harness.create("m", ms(revision="v2"))
    await harness.reconcile("m")
    assert (await harness.status("m"))["resolved"]["revision"] == commit
    assert state.tag_object("v2", commit) != commit  # git advertises a different object first


async def test_index_and_git_disagreeing_is_refused(harness: Harness) -> None:
    repo = harness.hub.add_repo(REPO, FILES)
    repo.git_refs_override["refs/heads/master"] = "e" * 40
    await harness.create("m", ms())
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "SourceUnavailable")
    assert "git" in json.dumps(await harness.status("m"))


async def test_a_full_commit_is_taken_as_is(harness: Harness) -> None:
    repo = harness.hub.add_repo(REPO, FILES)
    await harness.create("m", ms(revision=repo.commit))
    await harness.reconcile("m")
    assert await harness.condition("m") == ("True", "Resolved")
    assert harness.hub.requests(f"/api/v1/models/{REPO}/commits") == 0
    assert harness.hub.requests(f"/{REPO}.git/info/refs") == 0


async def test_revision_not_found_from_commits_and_from_the_listing(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)
    await harness.create("branch", ms(revision="nope"))
    await harness.reconcile("branch")
    assert await harness.condition("branch") == ("False", "RevisionNotFound")
    await harness.create("commit", ms(revision="f" * 40))  # no file tree at that revision
    await harness.reconcile("commit")
    assert await harness.condition("commit") == ("False", "RevisionNotFound")


@pytest.mark.parametrize("case", ["not-found", "no-access-code", "401", "403", "private"])
async def test_access_refusals(harness: Harness, case: str) -> None:
    if case == "not-found":
        repo = "qwen/absent"
    else:
        repo = REPO
        harness.hub.add_repo(REPO, FILES, private_token=TOKEN if case == "private" else None)
        faults = harness.hub.faults(REPO)
        if case == "no-access-code":
            faults.fail_times, faults.fail_status, faults.fail_code = 1, 404, 10010200001
        elif case in ("401", "403"):
            faults.fail_times, faults.fail_status = 1, int(case)
    await harness.create("m", ms(repo))
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "AccessDenied")
    assert "does not exist or is not accessible" in json.dumps(await harness.status("m"))


async def test_a_private_repository_reads_with_the_token(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES, private_token=TOKEN)
    harness.secret("ms", TOKEN)
    await harness.create("m", ms(secret="ms"))
    await harness.reconcile("m")
    assert await harness.condition("m") == ("True", "Resolved")
    assert TOKEN not in json.dumps(await harness.stored("m"))
    assert harness.events.seen[-1][:2] == ("Normal", "Resolved")  # no InvalidToken warning


@pytest.mark.parametrize("case", ["503", "network-like-500", "unenumerable"])
async def test_source_unavailable(harness: Harness, case: str) -> None:
    if case == "unenumerable":
        # 3000 direct children: the API truncates every listing of that directory
        harness.hub.add_repo(REPO, {f"d/f{i}": b"x" for i in range(3000)})
    else:
        harness.hub.add_repo(REPO, FILES)
        harness.hub.faults(REPO).fail_times = 1
        harness.hub.faults(REPO).fail_status = 503 if case == "503" else 500
    await harness.create("m", ms())
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "SourceUnavailable")


async def test_a_truncated_listing_is_listed_again_per_directory(harness: Harness) -> None:
    """3006 entries: the recursive listing stops silently at 3000, so each directory is
    listed on its own (the real limit, not a lowered one)."""
    files: dict[str, Any] = {f"d{d}/f{i}.bin": b"%d" % i for d in range(3) for i in range(1001)}
    harness.hub.add_repo(REPO, files)
    await harness.create("m", ms())
    await harness.reconcile("m")
    assert (await harness.status("m"))["resolved"]["fileCount"] == 3003
    assert harness.hub.requests(f"/api/v1/models/{REPO}/repo/files") == 5


async def test_a_rejected_token_is_a_warning_once(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES)  # public: the token is not needed, and it is mistyped
    harness.secret("ms", "ms_mistyped_token")
    await harness.create("m", ms(secret="ms"))
    await harness.create("n", ms(secret="ms"))
    await harness.reconcile("m")
    await harness.reconcile("n")
    warnings = [e for e in harness.events.seen if e[1] == "InvalidToken"]
    assert len(warnings) == 1 and "a/ms" in warnings[0][2]
    assert "ms_mistyped_token" not in warnings[0][2]
    assert harness.hub.requests("/openapi/v1/users/me") == 1
    assert await harness.condition("m") == ("True", "Resolved")


async def test_revalidation_is_one_head_of_the_repo_path(harness: Harness) -> None:
    harness.hub.add_repo(REPO, FILES, private_token=TOKEN)
    harness.secret("ms", TOKEN)
    await harness.create("m", ms(secret="ms"))
    await harness.reconcile("m")
    harness.hub.reset_counters()
    harness.clock.advance(86400)
    await harness.reconcile("m")
    assert harness.hub.total_requests() == 1
    assert harness.hub.requests(f"/api/v1/models/{REPO}/repo") == 1
    assert await harness.condition("m", "Degraded") == ("False", "Healthy")
    harness.hub.repo(REPO).private_token = "another"  # the grant is gone
    harness.clock.advance(86400)
    await harness.reconcile("m")
    assert await harness.condition("m", "Degraded") == ("True", "AccessDenied")
    harness.clock.advance(60)
    await harness.reconcile("m")
    assert await harness.condition("m") == ("False", "AccessDenied")
