"""The fixture hub's git ref advertisement against the real ``git ls-remote``: branches, a
lightweight and an annotated tag (peeled), a private repository with ``oauth2:<token>``, and the
same refs as ``hub.gitrefs`` parses them."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator

import pytest

from devkit import fixturehub
from devkit.fixturehub import state
from hub import config, gitrefs, modelscope

pytestmark = pytest.mark.integration

TOKEN = "ms_git_token_5"
COMMIT, TAGGED = "a" * 40, "b" * 40


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo("org/model", {"a.json": b"{}"}, commit=COMMIT,
                         tags={"light": COMMIT}, annotated_tags={"v1": TAGGED})
        running.add_repo("org/private", {"a.json": b"{}"}, commit=COMMIT,
                         private_token=TOKEN)
        yield running


def _ls_remote(url: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "GIT_TERMINAL_PROMPT": "0",
           "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "ls-remote", url], capture_output=True, text=True, env=env,
                          timeout=60)


def _parse(stdout: str) -> dict[str, str]:
    return {name: sha for sha, name in (line.split("\t") for line in stdout.splitlines())}


async def _ours(hub: fixturehub.Hub, repo: str, token: str | None) -> dict[str, str]:
    async with config.make_client(config.HubConfig(modelscope_endpoint=hub.endpoint)) as c:
        ms = modelscope.ModelScope(c, hub.endpoint)
        return await gitrefs.list_refs(c, ms.git_url(repo), endpoint=hub.endpoint, token=token,
                                       what=repo, mapper=modelscope.map_error)


def test_git_reads_the_advertisement_as_hub_gitrefs_does(hub: fixturehub.Hub) -> None:
    answer = _ls_remote(f"{hub.endpoint}/org/model.git")
    assert answer.returncode == 0, answer.stderr
    refs = _parse(answer.stdout)
    assert refs == {"HEAD": COMMIT, "refs/heads/main": COMMIT, "refs/heads/master": COMMIT,
                    "refs/tags/light": COMMIT, "refs/tags/v1": state.tag_object("v1", TAGGED),
                    "refs/tags/v1^{}": TAGGED}
    assert asyncio.run(_ours(hub, "org/model", None)) == refs
    assert gitrefs.commit_for(refs, "v1") == TAGGED


def test_a_private_repository_needs_oauth2_and_the_token(hub: fixturehub.Hub) -> None:
    refused = _ls_remote(f"{hub.endpoint}/org/private.git")
    assert refused.returncode != 0
    with_token = hub.endpoint.replace("http://", f"http://oauth2:{TOKEN}@")
    answer = _ls_remote(f"{with_token}/org/private.git")
    assert answer.returncode == 0, answer.stderr
    assert _parse(answer.stdout)["refs/heads/main"] == COMMIT
    assert asyncio.run(_ours(hub, "org/private", TOKEN))["refs/heads/main"] == COMMIT
