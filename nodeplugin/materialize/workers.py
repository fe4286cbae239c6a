"""The range workers of an attempt: every part of its files fetched, each from its file's source.

``fetch`` runs each unfinished file's consumer (``transfer.FileTransfer.consume``: hashing and
writing in order) beside ``Node.workers`` workers that take parts from one ``ranges.Schedule``.
A worker books the part's look-ahead budget (a file's frontier part books none), then fetches it
from the source ``source_of`` names for the file at that moment (the hub client, the tree's
relay, or a file's own relay under ``swarm``): through a receive thread when the source can open
blocking ranges (``receive``), else as an async stream (``ranges``). The first failure ends the
whole fetch; an integrity failure is reported before any other.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from hub import blocking as hub_blocking
from hub import source
from nodeplugin.materialize import ranges, receive, transfer

if TYPE_CHECKING:
    from nodeplugin.materialize import attempt


async def fetch(files: list[transfer.FileTransfer], node: attempt.Node,
                source_of: Callable[[str], source.Source], repo: str, commit: str,
                token: Callable[[], str | None]) -> None:
    """Fetch every unfinished file of ``files`` to its end (``token()``: the credential at each
    request; a mount may bring a newer one meanwhile)."""
    schedule = ranges.Schedule([(f, f.parts) for f in files if not f.complete])
    try:
        async with asyncio.TaskGroup() as group:
            for f in files:
                if not f.complete:
                    group.create_task(f.consume())
            for _ in range(node.workers):
                group.create_task(_worker(schedule, node, source_of, repo, commit, token))
    except BaseExceptionGroup as group_error:
        raise first(group_error) from None


async def _worker(schedule: ranges.Schedule[transfer.FileTransfer], node: attempt.Node,
                  source_of: Callable[[str], source.Source], repo: str, commit: str,
                  token: Callable[[], str | None]) -> None:
    while (item := schedule.next()) is not None:
        stream, f, part = item
        path = f.entry.path
        client = source_of(path)
        blocking = isinstance(client, source.BlockingRanges) and client.can_open_ranges

        def open_stream(start: int, end: int, path: str = path,
                        client: source.Source = client) -> AsyncIterator[bytes]:
            return client.stream(repo, commit, path, start=start, end=end, token=token())

        def open_body(start: int, end: int, stall: float, path: str = path,
                      client: source.Source = client) -> hub_blocking.RangeBody:
            assert isinstance(client, source.BlockingRanges)
            return client.open_range(repo, commit, path, start=start, end=end,
                                     token=token(), read_timeout=stall)

        try:
            part.booked = await node.budget.acquire(
                part.length, functools.partial(f.is_frontier, part)
            )
            part.reserved = part.booked > 0
            if blocking:
                await receive.fetch(part, open_body, node.requests, node.rate, node.policy,
                                    what=path, executor=node.executor, pool=node.buffers,
                                    budget=node.budget)
            else:
                await ranges.fetch(part, open_stream, node.requests, node.rate,
                                   node.policy, what=path, budget=node.budget)
        except BaseException as exc:
            part.finish(exc)
            raise
        finally:
            schedule.done(stream)
        part.finish()


def first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error to report from a task group: prefer an integrity failure, then any other."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if isinstance(exc, transfer.IntegrityError):
            return exc
    for exc in leaves:
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return leaves[0]
