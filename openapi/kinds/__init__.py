"""One module per kind: its TypedDict view (``VIEW``, checked against ``schema.KINDS[KIND]``) and
the one reader of each field the other parts read."""
