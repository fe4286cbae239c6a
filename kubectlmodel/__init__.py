"""``kubectl model``: the kubectl plugin for model-manager (``kubectl-model`` on the PATH).

``progress`` draws a download as it happens (one bar per node and the artifact's total, or a
line per update when stdout is not a terminal, or the progress object as JSON), ``nodes`` lists
the node stores, ``why`` explains an artifact that is not ready. It reads the API as the caller,
through ``kube`` (the one client) with the caller's kubeconfig and RBAC: a tenant who may not
list NodeModelStores sees what the ``progress`` subresource shows and nothing per node. It uses
the product's client layer and the contract's names only (an import-linter contract).
"""
