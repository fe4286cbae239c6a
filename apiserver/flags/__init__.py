"""The server's flags: ``cli`` parses the flags (``storage`` adds ``--storage``,
``--etcd-*`` and ``--processes``) into ``config.Settings``, the one frozen value every other part
reads."""
