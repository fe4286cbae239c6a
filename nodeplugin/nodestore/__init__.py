"""The node's NodeModelStore: its ``spec`` read and applied, its ``status`` written.

``spec`` (watermarks, download limits, hub endpoints, proxy and CA, kubelet thresholds, pins) is
the worker's; the plugin reads only its own object and the CA ConfigMap it names (``source``),
checks it (``spec``), caps the watermarks by the capacity rule (``watermarks``) and applies it to
the running pieces (``apply``, ``gate``). ``status`` is rebuilt from the disk and the live mounts
(``status``) and written on thresholds (``reporter``). Collection (``collect``) removes content by
the watermarks. Nothing here names a tenant.
"""
