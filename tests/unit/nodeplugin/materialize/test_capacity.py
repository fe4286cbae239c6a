"""Reservations against the high watermark count every running download's remainder."""

from __future__ import annotations

import pytest

from nodeplugin.materialize import capacity


class Disk:
    def __init__(self, total: int, used: int) -> None:
        self.total = total
        self.used = used

    def __call__(self, _root: object) -> capacity.Usage:
        return capacity.Usage(self.total, self.used)


def test_two_that_fit_alone_are_not_both_admitted() -> None:
    disk = Disk(total=1000, used=100)  # 80% of 1000 = 800; 700 free under the watermark
    ledger = capacity.Capacity("/", high_percent=80, usage=disk)
    first = ledger.reserve("a", 500)
    with pytest.raises(capacity.InsufficientCapacity) as refused:
        ledger.reserve("b", 500)
    assert refused.value.available == 200
    first.release()
    ledger.reserve("b", 500)


def test_written_bytes_move_from_booked_to_used() -> None:
    disk = Disk(total=1000, used=0)
    ledger = capacity.Capacity("/", high_percent=80, usage=disk)
    reservation = ledger.reserve("a", 800)
    reservation.wrote(300)
    disk.used += 300
    assert ledger.outstanding() == 500
    with pytest.raises(capacity.InsufficientCapacity):
        ledger.reserve("b", 1)


def test_statvfs_usage_reads_a_real_filesystem(tmp_path: object) -> None:
    usage = capacity.statvfs_usage(str(tmp_path))
    assert 0 < usage.used_bytes <= usage.total_bytes
