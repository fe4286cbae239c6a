"""The registry: one generic ``store.ResourceStore`` per resource plus a strategy owning its rules.

``build.build(storage, admission=...)`` wires one store per row of the resource table
(``openapi.resources.SERVED``; ``Registry.modelartifacts``, ``Registry.nodemodelstores``) over an
``apiserver.storage.interface.Store``. Objects are plain dicts; the stored bytes never carry
``metadata.resourceVersion`` (it is the storage revision). Storage errors are translated into
``apiserver.errors`` statuses here, once, so the HTTP layer and in-process controllers see the same
failures.
"""
