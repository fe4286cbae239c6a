"""The chart's helper, which cannot import Python, refuses exactly the watermark pairs
``openapi.nodestore.watermarks_problem`` (the one owner of the rule) refuses."""

from __future__ import annotations

import pytest

from devkit import helm
from openapi import nodestore


@pytest.mark.parametrize(("high", "low"), [(80, 79), (80, 80), (60, 75), (2, 1)])
def test_the_chart_helper_agrees_with_the_owner(high: int, low: int) -> None:
    result = helm.template(sets=[f"settings.model-store-high-watermark={high}",
                                 f"settings.model-store-low-watermark={low}"], check=False)
    refused = bool(nodestore.watermarks_problem(high, low))
    assert (result.returncode != 0) is refused, result.stderr
    if refused:
        assert f"model-store-low-watermark ({low}) must be below" in result.stderr
