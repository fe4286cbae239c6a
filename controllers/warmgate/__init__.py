"""The warm-gate controller: it releases the Pods that must run where their model is warm
(``keys.REQUIRE_WARM_NODE``) and that the Pod webhook created gated (``openapi.warmgate``)
because no node held a digest yet.

Inputs: the gated Pods (an informer selecting ``keys.WAITING_SELECTOR``, so it holds only them),
the warm nodes (``nodeview.warm``), the artifacts. A Pod is looked at again when it changes, when
a node's entry for one of its digests changes (the digest index), when an artifact it names
changes, and every ``RECHECK_SECONDS`` while it waits (a plugin coming up on a warm node changes
no store). Output: one JSON Patch per Pod once every digest is warm (the required term added, the
gate and the label removed), and an Event on the Pod saying why it waits, once per reason.
"""
