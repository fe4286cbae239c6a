"""The recorded kube-apiserver 1.36 samples (tests/data/kube-samples), loaded by name."""

from __future__ import annotations

import json
import pathlib
from typing import Any

DIR = pathlib.Path(__file__).resolve().parents[4] / "tests" / "data" / "kube-samples"


def load(name: str) -> Any:
    return json.loads((DIR / f"{name}.json").read_text())
