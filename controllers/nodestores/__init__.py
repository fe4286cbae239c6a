"""The node stores: one NodeModelStore per node that runs the CSI driver, its spec kept equal to
the settings ConfigMap merged with the node's kubelet configuration."""
