"""The capacity rule: the watermarks in force, capped when the cache shares kubelet's filesystem.

On a filesystem of its own the cache uses the watermarks as written. When it shares the
filesystem holding kubelet's ``pods`` directory (the two report the same ``st_dev``), filling the
cache up to the high watermark would push kubelet into disk-pressure eviction or image
collection, so the high watermark is capped at the lowest of ``100 - nodefs.available - 5``,
``100 - imagefs.available - 5`` and ``imageGCHighThresholdPercent - 5`` (the image thresholds
count because the plugin cannot see where the image store lives), with a floor of 2. A threshold
kubelet does not set takes kubelet's default (10%, 15%, 85), which caps at 80; so do all three
while ``spec.kubelet`` is absent. A quantity is converted to a share of the filesystem; one at or
above the filesystem's size cannot be a share of it and takes the default. The low watermark is
lowered with the cap when it would reach it.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import os

from nodeplugin.nodestore import spec as specs
from openapi import nodestore as contract
from openapi import quantity

DEFAULT_NODEFS = decimal.Decimal(10)
DEFAULT_IMAGEFS = decimal.Decimal(15)
DEFAULT_IMAGE_GC_HIGH = 85
MARGIN = 5
FLOOR = 2


@dataclasses.dataclass(frozen=True, slots=True)
class Effective:
    high_percent: int
    low_percent: int
    notes: tuple[str, ...] = ()
    """Sentences for the Ready message: where a cap came from, which defaults were assumed."""


def shares_filesystem(cache_root: str | os.PathLike[str], kubelet_dir: str | os.PathLike[str]
                      ) -> bool:
    """Whether the cache lives on the filesystem of kubelet's ``pods`` directory (same
    ``st_dev``). kubelet's directory stands in while ``pods`` does not exist yet; when neither
    can be read the answer is yes, the cautious one."""
    try:
        cache_dev = os.stat(cache_root).st_dev
    except OSError:
        return True
    for candidate in (os.path.join(kubelet_dir, "pods"), os.fspath(kubelet_dir)):
        try:
            return os.stat(candidate).st_dev == cache_dev
        except OSError:
            continue
    return True


def effective(high: int, low: int, known: specs.Kubelet | None, *, total_bytes: int,
              shared: bool) -> Effective:
    """The watermarks in force for the settings ``high``/``low`` and kubelet's thresholds
    ``known`` (``spec.kubelet``; None when unread) on a filesystem of ``total_bytes``."""
    if not shared:
        return Effective(high, low)
    notes: list[str] = []
    kubelet = known
    if kubelet is None:
        notes.append(
            "the node's effective kubelet configuration could not be read (no spec.kubelet), so "
            "kubelet's defaults are assumed: nodefs.available 10%, imagefs.available 15%, "
            "imageGCHighThresholdPercent 85"
        )
        kubelet = specs.Kubelet()
    nodefs = _share(kubelet.nodefs_available, kubelet.nodefs_text, "nodefs.available",
                    DEFAULT_NODEFS, total_bytes, notes)
    imagefs = _share(kubelet.imagefs_available, kubelet.imagefs_text, "imagefs.available",
                     DEFAULT_IMAGEFS, total_bytes, notes)
    gc_high = kubelet.image_gc_high_percent
    if gc_high is None:
        gc_high = DEFAULT_IMAGE_GC_HIGH
    caps = {
        f"nodefs.available {_pct(nodefs)}%": 100 - math.ceil(nodefs) - MARGIN,
        f"imagefs.available {_pct(imagefs)}%": 100 - math.ceil(imagefs) - MARGIN,
        f"imageGCHighThresholdPercent {gc_high}": gc_high - MARGIN,
    }
    source, cap = min(caps.items(), key=lambda item: item[1])
    cap = max(FLOOR, cap)
    if cap < high:
        origin = "spec.kubelet" if known is not None else "kubelet's defaults"
        notes.append(
            f"the high watermark is capped at {cap}% (the setting is {high}%) because the cache "
            f"shares kubelet's filesystem: {source} ({origin}) leaves {cap}% after the "
            f"{MARGIN}-point margin"
        )
        high = cap
    if contract.watermarks_problem(high, low):  # the cap broke the one rule: keep it
        lowered = max(1, high - 1)
        notes.append(f"the low watermark is lowered to {lowered}% with the cap (the setting is "
                     f"{low}%)")
        low = lowered
    return Effective(high, low, tuple(notes))


def _share(threshold: quantity.Threshold | None, text: str, name: str, default: decimal.Decimal,
           total_bytes: int, notes: list[str]) -> decimal.Decimal:
    if threshold is None:
        return default
    share = threshold.percent_of(total_bytes)
    if threshold.bytes is not None and threshold.bytes >= total_bytes:
        notes.append(
            f"{name} {text} is not smaller than the cache filesystem, so it cannot be a share "
            f"of it; kubelet's default {default}% is assumed instead"
        )
        return default
    return share


def _pct(value: decimal.Decimal) -> str:
    """A share as it reads in a message: whole numbers bare, others to one decimal."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{value:.1f}"

