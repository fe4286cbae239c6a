"""Helpers for the registry tests (the store and registry fixtures are in ../conftest.py)."""

from __future__ import annotations

from typing import Any


def artifact(name: str = "qwen", **metadata: Any) -> dict[str, Any]:
    """A valid ModelArtifact body."""
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": name, **metadata},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
    }
