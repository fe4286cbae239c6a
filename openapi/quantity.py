"""Kubernetes resource quantities (``200Mi``, ``1.5G``, ``10e9``) and percentages (``10%``).

The one reader of both, for every part that meets them: the download bandwidth Setting
(``model-store-download-bandwidth``), the worker's reading of kubelet's ``evictionHard``
thresholds and the node plugin's capacity rule. The grammar is apimachinery's
``resource.Quantity``: a signed decimal number, then a binary suffix (``Ki`` ... ``Ei``), a
decimal one (``n``, ``u``, ``m``, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or an exponent
(``e3``, ``E-2``).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import re

_NUMBER = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
MAX_TEXT = 64


class QuantityError(ValueError):
    """Not a quantity (or a percentage); the message says what the grammar wants."""


def parse(text: str) -> decimal.Decimal:
    """The exact value of a quantity."""
    value = text.strip()
    if not value or len(value) > MAX_TEXT:
        raise QuantityError("must be a quantity such as 200Mi, 1G or 500000000")
    match = _NUMBER.match(value)
    if match is None:
        raise QuantityError(f"{_shown(value)} is not a quantity such as 200Mi, 1G or 500000000")
    number, suffix = decimal.Decimal(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    exponent = _EXPONENT.match(suffix)
    if exponent is not None and abs(int(exponent.group(1))) <= 30:
        return number.scaleb(int(exponent.group(1)))
    raise QuantityError(
        f"{_shown(value)} has an unknown suffix (binary Ki..Ei, decimal k..E, or an exponent)"
    )


def to_bytes(text: str) -> int:
    """A non-negative quantity of bytes, rounded up to a whole byte."""
    value = parse(text)
    if value < 0:
        raise QuantityError(f"{_shown(text)} must not be negative")
    return math.ceil(value)


@dataclasses.dataclass(frozen=True, slots=True)
class Threshold:
    """A kubelet threshold: a share of the filesystem (``percent``) or an amount (``bytes``)."""

    percent: decimal.Decimal | None = None
    bytes: int | None = None

    def percent_of(self, total_bytes: int) -> decimal.Decimal:
        """The share of a filesystem of ``total_bytes`` this threshold is."""
        if self.percent is not None:
            return self.percent
        assert self.bytes is not None
        return decimal.Decimal(self.bytes) * 100 / max(1, total_bytes)


def threshold(text: str) -> Threshold:
    """``10%`` or a quantity (``5Gi``), as kubelet's ``evictionHard`` values are written."""
    value = text.strip()
    if value.endswith("%"):
        try:
            percent = decimal.Decimal(value[:-1])
        except decimal.InvalidOperation:
            raise QuantityError(f"{_shown(value)} is not a percentage such as 10%") from None
        if not percent.is_finite() or not 0 <= percent <= 100:
            raise QuantityError(f"{_shown(value)} must be between 0% and 100%")
        return Threshold(percent=percent)
    return Threshold(bytes=to_bytes(value))


def _shown(text: str) -> str:
    cut = text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."
    return repr(cut)
