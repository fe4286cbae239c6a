"""``openapi.quantity``: Kubernetes quantities and kubelet's percentages."""

from __future__ import annotations

import decimal

import pytest

from openapi import quantity


@pytest.mark.parametrize(("text", "value"), [
    ("200Mi", 200 * 2**20), ("1Gi", 2**30), ("1.5G", 1_500_000_000), ("500000000", 500_000_000),
    ("10e9", 10**10), ("2E3", 2000), ("100m", 0.1), ("0", 0), ("1k", 1000), ("+3Ki", 3072),
])
def test_quantities_read_as_apimachinery_reads_them(text: str, value: float) -> None:
    assert quantity.parse(text) == decimal.Decimal(str(value))


def test_bytes_round_up_and_refuse_negatives() -> None:
    assert quantity.to_bytes("100m") == 1
    assert quantity.to_bytes("1.5Ki") == 1536
    with pytest.raises(quantity.QuantityError, match="negative"):
        quantity.to_bytes("-1Mi")


@pytest.mark.parametrize("text", ["", "Mi", "1.2.3", "10 Mi", "1Zi", "1e99", "x" * 100])
def test_what_is_not_a_quantity_says_what_is(text: str) -> None:
    with pytest.raises(quantity.QuantityError) as info:
        quantity.parse(text)
    assert len(str(info.value)) < 200


def test_thresholds_are_percentages_or_amounts() -> None:
    assert quantity.threshold("10%").percent == 10
    assert quantity.threshold("7.5%").percent_of(1000) == decimal.Decimal("7.5")
    amount = quantity.threshold("100Mi")
    assert amount.bytes == 100 * 2**20
    assert amount.percent_of(1000 * 2**20) == 10
    for bad in ("101%", "-1%", "ten%"):
        with pytest.raises(quantity.QuantityError):
            quantity.threshold(bad)
