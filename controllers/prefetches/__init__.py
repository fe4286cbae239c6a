"""ModelPrefetch: the plan (which nodes, which phase), the status and delivery controller, warm-up
Pods (cluster delivery) and node plugin requests (standalone delivery)."""
