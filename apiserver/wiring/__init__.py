"""Putting the server together: the parts ``python -m apiserver`` builds for each mode.

``app`` (the starlette application: routes, middleware, the one error handler, lifespan),
``access`` (what authenticates, authorizes and guards requests: standalone's static tokens and
local RBAC) and ``delegation`` (cluster mode's delegated chain, over ``apiserver.cluster``),
``standalone`` (the data directory: CA, serving certificate, tokens, policy, kubeconfigs, written
by ``kubeconfig``), ``embedded`` (what runs beside serving: the progress view and the
controllers, through ``inprocess``, the in-process client, electing a leader with ``leases``
when no cluster is configured).
"""
