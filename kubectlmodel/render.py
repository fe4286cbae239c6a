"""What ``progress`` shows, from a snapshot: a rich table of bars for a terminal, and the same
facts as plain lines for a pipe (one line per thing that changed). Pure functions of the
snapshot, the rates and the time, so the tests render them to a string."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from rich import box
from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from kube import gpustack
from kubectlmodel import snapshot
from openapi import columns, sources, states
from openapi.kinds import modelartifact, progress

TOTAL = "total"
BAR_WIDTH = 30
MESSAGE_WIDTH = 120


def size(count: int) -> str:
    return columns.size_text(max(0, count))


def percent(have: int, want: int) -> int:
    return min(100, have * 100 // want) if want > 0 else 0


def rate_text(rate: snapshot.Rate | None) -> str:
    if rate is None or rate.bytes_per_second is None:
        return "-"
    return f"{size(int(rate.bytes_per_second))}/s"


def eta_text(rate: snapshot.Rate | None) -> str:
    if rate is None or rate.eta_seconds is None:
        return "-"
    return columns.human_duration(rate.eta_seconds)


def retry_text(moment: datetime.datetime | None, now: datetime.datetime) -> str:
    if moment is None:
        return ""
    left = (moment - now).total_seconds()
    if left <= 0:
        return "retry due now"
    return f"retry in {columns.human_duration(left)}"


def source_text(artifact: gpustack.Artifact) -> str:
    kind = modelartifact.source_kind(artifact.raw)
    hub = sources.hub_kind(kind)
    if hub is not None:
        revision = modelartifact.source_revision(artifact.raw) or sources.DEFAULT_REVISIONS[hub]
        return f"{sources.HUB_NAMES[hub]} {modelartifact.repository(artifact.raw)}@{revision}"
    if kind == sources.CLAIM:
        return f"claim/{modelartifact.claim_name(artifact.raw)}"
    if kind == sources.IMAGE:
        return f"image {modelartifact.image_reference(artifact.raw)}"
    return "no source"


def short_digest(digest: str) -> str:
    return digest[: len("sha256:") + 12] if digest else ""


def resolution_text(shot: snapshot.Snapshot) -> str:
    """The artifact's resolution in one line."""
    artifact = shot.artifact
    if artifact.resolved:
        if not shot.counted:
            return f"Resolved: {progress.reason(shot.progress) or 'nothing to download'}"
        digest = short_digest(artifact.manifest_digest)
        return f"Resolved {artifact.revision[:12] or '-'}, {digest}, {size(shot.size)}"
    why = artifact.reason or states.PENDING
    message = artifact.message or "the worker has not looked at it yet"
    return f"not resolved: {why}: {cut(message)}"


def cut(text: str, width: int = MESSAGE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def node_detail(row: snapshot.NodeRow, now: datetime.datetime) -> str:
    parts = []
    if row.state == states.FAILED:
        parts.append(row.reason or states.FAILED)
        if row.message:
            parts.append(cut(row.message, 80))
        retry = retry_text(row.retry_time, now)
        if retry:
            parts.append(retry)
    if not row.store_ready:
        parts.append("node store not Ready")
    return "; ".join(parts)


def total_state(shot: snapshot.Snapshot) -> str:
    return (f"{shot.count('ready')} ready, {shot.count('downloading')} downloading, "
            f"{shot.count('failed')} failed")


def total_detail(shot: snapshot.Snapshot) -> str:
    reasons = ", ".join(f"{reason} x{count}"
                        for reason, count in progress.failure_reasons(shot.progress))
    if shot.nodes is None:
        note = "per node: not permitted to list nodemodelstores"
        return f"{reasons}; {note}" if reasons else note
    return reasons


def rates_for(shot: snapshot.Snapshot, rates: snapshot.Rates) -> dict[str, snapshot.Rate]:
    """Feed the snapshot's byte counts to ``rates``; the rate of every node and the total."""
    found: dict[str, snapshot.Rate] = {}
    for row in shot.nodes or ():
        if row.state == states.DOWNLOADING:
            found[row.node] = rates.add(row.node, shot.at, row.downloaded_bytes, row.size_bytes)
        else:
            rates.forget(row.node)
    have, want = shot.total()
    if shot.count("downloading"):
        found[TOTAL] = rates.add(TOTAL, shot.at, have, want)
    else:
        rates.forget(TOTAL)
    return found


def frame(shot: snapshot.Snapshot, rates: Mapping[str, snapshot.Rate]) -> RenderableType:
    """The terminal view: a title line, then one bar per node and the total."""
    artifact = shot.artifact
    title = Text.assemble((f"{artifact.namespace}/{artifact.name}", "bold"), "  ",
                          source_text(artifact), "  ", resolution_text(shot))
    if not artifact.resolved or not shot.counted:
        return Group(title)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for heading in ("NODE", "STATE", "PROGRESS", "BYTES", "RATE", "ETA", "DETAIL"):
        table.add_column(heading, no_wrap=heading != "DETAIL")
    for row in shot.nodes or ():
        table.add_row(
            Text(row.node), Text(row.state, STATE_STYLES.get(row.state, "")),
            _bar(row.downloaded_bytes, row.size_bytes, row.state),
            f"{size(row.downloaded_bytes)}/{size(row.size_bytes)}"
            f" {percent(row.downloaded_bytes, row.size_bytes)}%",
            rate_text(rates.get(row.node)), eta_text(rates.get(row.node)),
            Text(node_detail(row, shot.now)),
        )  # fmt: skip
    have, want = shot.total()
    others = f"{shot.count('downloading')} downloading, {shot.count('failed')} failed"
    detail = total_detail(shot)
    table.add_row(
        Text(TOTAL, "bold"), Text(f"{shot.count('ready')} ready"),
        _bar(have, want, states.READY if shot.done else ""),
        f"{size(have)}/{size(want)} {percent(have, want)}%",
        rate_text(rates.get(TOTAL)), eta_text(rates.get(TOTAL)),
        Text(f"{others}; {detail}" if detail else others),
    )  # fmt: skip
    return Group(title, table)


STATE_STYLES = {states.READY: "green", states.FAILED: "red", states.DOWNLOADING: "cyan"}


def _bar(have: int, want: int, state: str) -> ProgressBar:
    style = STATE_STYLES.get(state, "")
    return ProgressBar(total=float(max(want, 1)), completed=float(min(have, max(want, 1))),
                       width=BAR_WIDTH, complete_style=style or "bar.complete",
                       finished_style=style or "bar.finished")


@dataclasses.dataclass(frozen=True, slots=True)
class Line:
    key: str
    change: tuple[object, ...]
    """What must differ for the line to be printed again (not the rate, which always moves)."""
    text: str


def lines(shot: snapshot.Snapshot, rates: Mapping[str, snapshot.Rate]) -> list[Line]:
    """The pipe view: the resolution, each node, the total."""
    artifact = shot.artifact
    name = artifact.name
    found = [Line("artifact", (artifact.resolved, artifact.reason, artifact.message),
                  f"{name}  {resolution_text(shot)}")]
    if not artifact.resolved or not shot.counted:
        return found
    for row in shot.nodes or ():
        rate = rates.get(row.node)
        text = (f"{name}  {row.node}  {row.state}  {size(row.downloaded_bytes)}/"
                f"{size(row.size_bytes)}  {percent(row.downloaded_bytes, row.size_bytes)}%")
        if row.state == states.DOWNLOADING:
            text += f"  {rate_text(rate)}  eta {eta_text(rate)}"
        detail = node_detail(row, shot.now)
        found.append(Line(row.node, (row.state, row.downloaded_bytes, row.reason,
                                     row.retry_time, row.store_ready),
                          f"{text}  {detail}" if detail else text))
    have, want = shot.total()
    text = (f"{name}  {TOTAL}  {total_state(shot)}  {size(have)}/{size(want)}"
            f"  {percent(have, want)}%")
    if shot.count("downloading"):
        text += f"  {rate_text(rates.get(TOTAL))}  eta {eta_text(rates.get(TOTAL))}"
    detail = total_detail(shot)
    found.append(Line(TOTAL, (shot.count("ready"), shot.count("downloading"),
                              shot.count("failed"), have, want, detail),
                      f"{text}  {detail}" if detail else text))
    return found
