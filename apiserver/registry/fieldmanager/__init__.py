"""Server-side apply and ``metadata.managedFields``, as kube-apiserver keeps them.

No maintained Python library implements Kubernetes' structured merge (kube's is Go,
``sigs.k8s.io/structured-merge-diff``), so this package holds our own, small and schema-driven:

- ``fieldsets``: the fields an object sets, read through its schema (``x-kubernetes-list-type``
  ``set`` and ``map`` lists by value and by key, ``atomic`` lists and ``x-kubernetes-map-type:
  atomic`` maps whole), and their ``FieldsV1`` encoding;
- ``merge``: an applied configuration merged into the live object, and the fields an applier
  gave up removed;
- ``managed``: the entries (manager, operation, subresource, time, fields), the Update and Apply
  operations, kube's 409 for conflicts;
- ``tracking``: the strategy mixin that records the entries on every write of a request, told who
  writes by the endpoint (``tracking.writing``).

``tests/unit/apiserver/registry/test_fieldmanager_table.py`` holds the table of kube's behaviour.
"""
