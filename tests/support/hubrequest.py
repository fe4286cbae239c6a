"""The node cache's request for a fixture hub repository, its manifest digest computed here from
the hub's own listing (independently of any server), as a resolved artifact would name it."""

from __future__ import annotations

from devkit import fixturehub
from hub import config as hub_config
from hub import huggingface, listing
from nodeplugin.materialize import interface


async def request_for(hub: fixturehub.Hub, repo: str) -> interface.Request:
    """``repo`` at its current commit on ``hub`` (Hugging Face routes, no token)."""
    http = hub_config.make_client(hub_config.HubConfig(huggingface_endpoint=hub.endpoint))
    try:
        commit = hub.repo(repo).commit
        _, _, digest = await listing.manifest_for(
            huggingface.HuggingFace(http, hub.endpoint), repo, commit, (), (), token=None)
    finally:
        await http.aclose()
    return interface.Request(digest, interface.Source("huggingFace", repo, commit))
