"""The GPUStack server's client of model-manager (``worker.gpustack.ai/v1``): async first
(``ModelManager``), a blocking facade (``SyncModelManager``), on kubernetes-asyncio; Python
3.10+."""

from model_manager_client.client import SOURCE_LABEL, ModelManager, hub_source, source_key
from model_manager_client.sync import SyncModelManager
from model_manager_client.types import (
    AlreadyExists,
    Artifact,
    Copies,
    Forbidden,
    Invalid,
    Manifest,
    ManifestFile,
    ModelManagerError,
    NodeCopy,
    NotFound,
    ReadyTimeout,
    ResolutionFailed,
    ResolutionTimeout,
)

__all__ = [
    "SOURCE_LABEL", "AlreadyExists", "Artifact", "Copies", "Forbidden", "Invalid", "Manifest",
    "ManifestFile", "ModelManager", "ModelManagerError", "NodeCopy", "NotFound", "ReadyTimeout",
    "ResolutionFailed", "ResolutionTimeout", "SyncModelManager", "hub_source", "source_key",
]
