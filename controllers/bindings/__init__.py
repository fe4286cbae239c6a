"""ModelStoreBinding usage: ``status.usedBytes`` and ``OverQuota`` (docs/api.md,
"ModelStoreBinding")."""
