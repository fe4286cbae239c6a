"""hub.endpoint owns what both hubs do alike; a second copy in a hub fails here (issue 20)."""

from __future__ import annotations

import ast
import pathlib
import types
from collections.abc import Callable

import httpx
import pytest

from hub import endpoint, errors, huggingface, modelscope

COMMIT = "d" * 40
HUBS = (huggingface.HuggingFace, modelscope.ModelScope)
# What each hub may define for itself: only what differs between them.
OWN_METHODS = frozenset({"label", "resolve_revision", "list_files", "file_url"})
OWN_FUNCTIONS = frozenset({"map_error"})


def _own(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("__") and name != "_abc_impl"}


def test_shared_calls_are_the_base_class_s() -> None:
    for name in ("stream", "open_range", "check_access", "get_json", "can_open_ranges",
                 "endpoint", "describe"):
        for hub in HUBS:
            assert name not in vars(hub), f"{hub.__name__}.{name}: a second copy of Endpoint's"
            assert getattr(hub, name) is getattr(endpoint.Endpoint, name)


def test_the_hubs_define_nothing_else_by_the_same_name() -> None:
    both = _own(huggingface.HuggingFace) & _own(modelscope.ModelScope)
    assert both <= OWN_METHODS, (
        f"both hubs define {sorted(both - OWN_METHODS)}: one owner in hub.endpoint.Endpoint, or "
        "name it in OWN_METHODS if it really differs"
    )


def _functions(module: types.ModuleType) -> set[str]:
    tree = ast.parse(pathlib.Path(str(module.__file__)).read_text())
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_the_hub_modules_share_no_function_name_but_their_mappers() -> None:
    both = _functions(huggingface) & _functions(modelscope)
    assert both <= OWN_FUNCTIONS, f"both hub modules define {sorted(both - OWN_FUNCTIONS)}"


def _client(seen: list[str], status: int) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}?{request.url.query.decode()}")
        return httpx.Response(status)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)


async def test_modelscope_revalidates_at_its_file_url_with_its_own_mapping() -> None:
    seen: list[str] = []
    async with _client(seen, 302) as client:
        ms = modelscope.ModelScope(client, "https://ms.example/")
        await ms.check_access("org/model", COMMIT, "a b.bin", token=None)
    assert seen == [f"HEAD /api/v1/models/org/model/repo?Revision={COMMIT}&FilePath=a+b.bin"]
    seen.clear()
    async with _client(seen, 404) as client:
        ms = modelscope.ModelScope(client, "https://ms.example")
        with pytest.raises(errors.HubError) as caught:
            await ms.check_access("org/model", COMMIT, "x.bin", token=None)
    assert caught.value.reason == "AccessDenied"
    assert caught.value.message.startswith("ms.example model org/model ")  # the endpoint's host


@pytest.mark.parametrize("hub", [huggingface.HuggingFace, modelscope.ModelScope])
async def test_a_download_error_names_the_hub_the_repository_and_the_file(
    hub: Callable[[httpx.AsyncClient, str], endpoint.Endpoint],
) -> None:
    seen: list[str] = []
    async with _client(seen, 503) as client:
        source = hub(client, "https://hub.example")
        with pytest.raises(errors.HubError) as caught:
            async for _ in source.stream("org/model", COMMIT, "w.bin", token=None):
                pass
    assert caught.value.reason == "SourceUnavailable"
    # the configured endpoint's host (a mirror's), never a hard-coded public one
    assert caught.value.message.startswith("hub.example model org/model file w.bin:")
    assert "huggingface.co" not in caught.value.message
    assert source.endpoint == "https://hub.example"
    assert not source.can_open_ranges
    with pytest.raises(errors.HubError, match="no blocking client"):
        source.open_range("org/model", COMMIT, "w.bin", start=0, end=1, token=None)
