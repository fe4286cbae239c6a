"""``kubectl model why NAME``: why an artifact is not ready, in the order the delivery goes.

The chain: the artifact's conditions (Resolved, then Degraded, and when the worker tries again),
what the ``progress`` subresource counts, then each node's row (``copies``, else the
NodeModelStores: its state, its failure's reason and message, when it tries again), where the
caller may read them. The first line is the verdict; the rest are the facts behind it. The exit
code is 0 when the verdict is ready, 1 otherwise (as a script's check wants).
"""

from __future__ import annotations

import datetime
import time

from rich.console import Console

from kube import gpustack
from kubectlmodel import render, snapshot
from openapi import columns, reasons, states, wire
from openapi.kinds import modelartifact, progress


def _condition(artifact: gpustack.Artifact, kind: str) -> wire.Readable | None:
    return wire.condition(modelartifact.status(artifact.raw), kind)


def _since(condition: wire.Readable, now: datetime.datetime) -> str:
    moment = snapshot.parse_time(condition.get("lastTransitionTime"))
    if moment is None:
        return ""
    return f" (for {columns.human_duration((now - moment).total_seconds())})"


def is_ready(shot: snapshot.Snapshot) -> bool:
    """The verdict says ready: resolved, and (when nodes are counted) ready on a node with
    nothing downloading or failed."""
    if not shot.artifact.resolved:
        return False
    if not shot.counted:
        return True
    return bool(shot.count("ready")) and not shot.count("downloading") \
        and not shot.count("failed")


def verdict(shot: snapshot.Snapshot) -> str:
    artifact = shot.artifact
    name = f"{artifact.namespace}/{artifact.name}"
    if not artifact.resolved:
        why = artifact.reason or states.PENDING
        return f"{name} is not ready: it is not resolved ({why})."
    if not shot.counted:
        return f"{name} is ready: {progress.reason(shot.progress) or 'nothing to download'}"
    ready, downloading, failed = (shot.count(k) for k in ("ready", "downloading", "failed"))
    if ready and not downloading:
        return f"{name} is ready on {_nodes(ready)}."
    parts = []
    if downloading:
        mean = progress.downloading_percent(shot.progress)
        parts.append(f"downloading on {_nodes(downloading)}"
                     + (f" ({mean}%)" if mean is not None else ""))
    if failed:
        parts.append(f"failed on {_nodes(failed)}")
    if ready:
        parts.append(f"ready on {_nodes(ready)}")
    if not parts:
        return (f"{name} is not ready: no node holds or downloads it yet; a node fetches it when"
                " a Pod mounts it.")
    return f"{name} is not ready everywhere: {', '.join(parts)}." if ready else \
        f"{name} is not ready: {', '.join(parts)}."


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def chain(shot: snapshot.Snapshot) -> list[str]:
    """The facts, one line each, indented under the verdict."""
    artifact = shot.artifact
    found = []
    for kind in reasons.ARTIFACT_CONDITIONS:
        condition = _condition(artifact, kind)
        if condition is None:
            found.append(f"{kind}: not reported yet (the worker has not looked at it)")
            continue
        message = render.cut(str(condition.get("message") or ""), 300)
        found.append(f"{kind}={condition.get('status')} {condition.get('reason') or ''}"
                     f"{_since(condition, shot.now)}: {message}")
    if not artifact.resolved and artifact.retry_time is not None:
        when = artifact.retry_time.strftime("%Y-%m-%dT%H:%M:%SZ")
        verb = "cannot be fixed by waiting" if artifact.terminal_reason else "may pass"
        found.append(f"this {verb}; the worker's "
                     f"{render.retry_text(artifact.retry_time, shot.now)} (at {when})")
    if not artifact.resolved or not shot.counted:
        return found
    found.append(f"progress: {render.total_state(shot)}, "
                 f"{render.size(shot.total()[0])} of {render.size(shot.total()[1])}")
    for reason, count in progress.failure_reasons(shot.progress):
        found.append(f"  {count} failed with {reason}")
    if shot.nodes is None:
        found.append("nodes: not shown (you may not list nodemodelstores nor get "
                     "modelartifacts/copies); the counts above are the progress subresource's")
        return found
    for row in shot.nodes:
        text = (f"node {row.node}: {row.state} "
                f"{render.size(row.downloaded_bytes)}/{render.size(row.size_bytes)}")
        if row.state == states.FAILED:
            text += f", {row.reason or states.FAILED}: {render.cut(row.message, 300)}"
            if row.retry_time is not None:
                when = row.retry_time.strftime("%Y-%m-%dT%H:%M:%SZ")
                text += f"; {render.retry_text(row.retry_time, shot.now)} (at {when})"
        if row.state == states.PENDING and row.reason:
            text += f", {row.reason}: {render.cut(row.message, 300)}"
        if not row.store_ready:
            text += "; its node store is not Ready (the plugin may be down)"
        found.append(text)
    return found


async def run(models: gpustack.ModelManager, namespace: str, name: str, *,
              console: Console) -> int:
    reader = snapshot.Reader(models, namespace, name)
    shot = await reader.take(time.monotonic(), datetime.datetime.now(datetime.UTC))
    console.print(verdict(shot), highlight=False, markup=False)
    for line in chain(shot):
        console.print(f"  {line}", highlight=False, markup=False)
    return 0 if is_ready(shot) else 1
