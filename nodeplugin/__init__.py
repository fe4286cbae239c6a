"""The CSI node plugin (driver model.csi.gpustack.ai): authorize, materialize, publish, mount."""
