"""``kubectl model nodes``: every NodeModelStore with its pool (the ModelStore merged into its
spec, and the operator's switches in force there), its cache's use and the content it holds.

Each digest says whether a Pod mounts it (``mounted``, else ``unreferenced``: collectable) and
whether the node keeps it (``pinned``; a pinned digest not held yet too); READY gives the
condition's reason when it is not True. A digest is shown with the artifacts that name it
where the caller may list artifacts in every namespace (an operator); otherwise by digest
alone, as the node store itself reports it (it never names a tenant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

import kube
from kube import gpustack
from kubectlmodel import render
from openapi import reasons, states, wire
from openapi.kinds import nodemodelstore


def used_text(store: gpustack.NodeStore) -> str:
    if not store.total_bytes:
        return "-"
    used = f"{render.size(store.stored_bytes)}/{render.size(store.total_bytes)}"
    return f"{used} ({store.used_percent}% of the filesystem)" if store.used_percent is not None \
        else used


def model_lines(store: gpustack.NodeStore, names: Mapping[str, Sequence[str]]) -> str:
    found = []
    for model in store.models:
        digest = nodemodelstore.entry_digest(model)
        state = nodemodelstore.entry_state(model)
        total = nodemodelstore.entry_size(model) or 0
        held = total if state == states.READY else nodemodelstore.entry_downloaded(model) or 0
        text = f"{render.short_digest(digest)} {state} {render.size(held)}/{render.size(total)}"
        if nodemodelstore.entry_reason(model):
            text += f" {nodemodelstore.entry_reason(model)}"
        text += " mounted" if nodemodelstore.entry_referenced(model) else " unreferenced"
        if digest in store.pinned:
            text += " pinned"
        if names.get(digest):
            text += " " + ",".join(names[digest])
        found.append(text)
    listed = {nodemodelstore.entry_digest(model) for model in store.models}
    for digest in store.pinned:
        if digest not in listed:
            found.append(f"{render.short_digest(digest)} pinned, not held yet")
    return "\n".join(found) or "-"


def pool_text(store: gpustack.NodeStore) -> str:
    """The ModelStore the node is merged from and the switches in force there; ``-``: none."""
    found = store.store or "-"
    notes = (["collection paused"] if store.paused else []) + (
        [f"evicting {len(store.evicting)}"] if store.evicting else [])
    return f"{found} ({', '.join(notes)})" if notes else found


def ready_text(store: gpustack.NodeStore) -> str:
    """The Ready condition's status, and for anything but True its reason (Unknown: the plugin
    never reported, or stopped reporting)."""
    ready = store.condition(reasons.READY)
    if ready is None:
        return "Unknown (no report from the node's plugin yet)"
    status = str(ready.get("status") or "Unknown")
    if status == wire.TRUE:
        return status
    reason = str(ready.get("reason") or "")
    return f"{status} ({reason})" if reason else status


def table(stores: Sequence[gpustack.NodeStore], names: Mapping[str, Sequence[str]]) -> Table:
    grid = Table(box=None, show_edge=False, pad_edge=False)
    for heading in ("NODE", "READY", "POOL", "USED/CAPACITY", "MODELS"):
        grid.add_column(heading, no_wrap=heading != "MODELS")
    for store in sorted(stores, key=lambda s: s.node):
        grid.add_row(Text(store.node), ready_text(store), Text(pool_text(store)),
                     used_text(store), Text(model_lines(store, names)))
    return grid


async def artifact_names(models: gpustack.ModelManager) -> dict[str, list[str]]:
    """digest -> ``namespace/name`` of the artifacts naming it; empty when not permitted."""
    try:
        artifacts = await models.list_artifacts("*")
    except kube.Forbidden:
        return {}
    names: dict[str, list[str]] = {}
    for artifact in artifacts:
        if artifact.manifest_digest:
            names.setdefault(artifact.manifest_digest, []).append(
                f"{artifact.namespace}/{artifact.name}")
    return {digest: sorted(found) for digest, found in names.items()}


async def run(models: gpustack.ModelManager, *, console: Console) -> int:
    stores = await models.node_stores()
    if not stores:
        console.print("No node stores found.", highlight=False)
        return 0
    found = table(stores, await artifact_names(models))
    if console.is_terminal:
        console.print(found)
        return 0
    # a pipe: kubectl's columns, without the padding rich gives the last one
    with console.capture() as captured:
        console.print(found)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    return 0
