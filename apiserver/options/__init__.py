"""The server's options: ``cli`` parses the flags (``storage_flags`` adds ``--storage``,
``--etcd-*`` and ``--workers``) into ``config.Settings``, the one frozen value every other part
reads."""
