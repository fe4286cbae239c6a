"""The names an installation shares with the chart: namespace, identities, Lease, settings.

The chart cannot import Python: ``tests/unit/charts/test_install_contract.py`` renders it and
checks it names these (its ServiceAccounts, the Lease its Role grants, the settings ConfigMap and
its keys). The API server, the controllers and the node plugin take their defaults from here.
"""

from __future__ import annotations

from typing import Final

DEFAULT_NAMESPACE: Final = "gpustack-system"
"""The product's namespace when ``$POD_NAMESPACE`` (set by the chart) says none."""

SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"
WORKER_SERVICE_ACCOUNT: Final = "model-manager-worker"
"""The worker's ServiceAccount (the chart's default release name): the controllers' identity,
also the name of its ClusterRole and the ``reportingComponent`` of its Events."""
PLUGIN_SERVICE_ACCOUNT: Final = "model-manager-node"
"""The node plugin's ServiceAccount (and ClusterRole)."""


def service_account_user(namespace: str, name: str) -> str:
    """The user name kube gives ServiceAccount ``name`` of ``namespace``."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


WORKER_USER: Final = service_account_user(DEFAULT_NAMESPACE, WORKER_SERVICE_ACCOUNT)
"""The default ``--worker-user``."""

LEASE: Final = "model-manager-controllers"
"""The controllers' leader-election Lease, in the worker's namespace."""
SETTINGS_CONFIGMAP: Final = "model-manager-settings"
"""The operator's settings ConfigMap, in the worker's namespace."""

STORE_PREFIX: Final = "model-store-"
ARTIFACT_PREFIX: Final = "model-artifact-"
HIGH_WATERMARK: Final = "model-store-high-watermark"
LOW_WATERMARK: Final = "model-store-low-watermark"
DOWNLOAD_CONCURRENCY: Final = "model-store-download-concurrency"
DOWNLOAD_BANDWIDTH: Final = "model-store-download-bandwidth"
PEER_SYNC: Final = "model-store-peer-sync"
HUGGING_FACE_ENDPOINT: Final = "model-artifact-huggingface-endpoint"
MODEL_SCOPE_ENDPOINT: Final = "model-artifact-modelscope-endpoint"
HTTPS_PROXY: Final = "model-artifact-https-proxy"
NO_PROXY: Final = "model-artifact-no-proxy"
CA_BUNDLE: Final = "model-artifact-ca-bundle"
REVALIDATE_INTERVAL: Final = "model-artifact-revalidate-interval"
SETTINGS_KEYS: Final = (
    HUGGING_FACE_ENDPOINT, MODEL_SCOPE_ENDPOINT, HTTPS_PROXY, NO_PROXY, CA_BUNDLE,
    REVALIDATE_INTERVAL, HIGH_WATERMARK, LOW_WATERMARK, DOWNLOAD_CONCURRENCY, DOWNLOAD_BANDWIDTH,
    PEER_SYNC,
)
"""Every key of the settings ConfigMap, in the chart's order (``values.yaml`` ``settings:``)."""

CA_BUNDLE_KEY: Final = "ca.crt"
"""The key of the ConfigMap ``CA_BUNDLE`` names that holds the extra CAs (PEM)."""

FILL_WEBHOOK_PATH: Final = "/webhooks/v1/pods/fill"
"""The API server's AdmissionReview endpoint that fills a model volume's attributes (the chart's
MutatingWebhookConfiguration, failure policy Fail)."""
PREFER_WEBHOOK_PATH: Final = "/webhooks/v1/pods/prefer"
"""The AdmissionReview endpoint that adds the placement term (failure policy Ignore)."""
WEBHOOK_PATHS: Final = (FILL_WEBHOOK_PATH, PREFER_WEBHOOK_PATH)
FILL_WEBHOOK: Final = "fill.pods.worker.gpustack.ai"
PREFER_WEBHOOK: Final = "prefer.pods.worker.gpustack.ai"
"""The two webhooks' names in the MutatingWebhookConfiguration (qualified, as kube requires)."""
