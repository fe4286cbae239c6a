"""Which partial downloads may be removed: no running attempt, and no mount asked in 24 hours.

Collection (a later issue) removes what this names; until then the plugin only reports them. The
time a mount last asked is the digest's ``lastUsedTime`` (``usage.UsageStore.touch``); a partial
whose digest has no usage record falls back to its directory's modification time.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Collection

from nodeplugin.cache import layout, usage

STALE_AFTER = datetime.timedelta(hours=24)


def removable_partials(
    cache: layout.Layout,
    usage_store: usage.UsageStore,
    *,
    running: Collection[str],
    now: datetime.datetime,
) -> list[layout.Partial]:
    """Partials of digests with no running attempt whose last ask is ``STALE_AFTER`` old."""
    found: list[layout.Partial] = []
    for partial in cache.partials():
        if partial.digest in running:
            continue
        record = usage_store.get(partial.digest)
        if record is not None:
            # Truncated to the hour: count from the end of that hour, never early.
            last = record.last_used + datetime.timedelta(hours=1)
        else:
            try:
                mtime = os.stat(partial.path).st_mtime
            except FileNotFoundError:
                continue
            last = datetime.datetime.fromtimestamp(mtime, datetime.UTC)
        if now - last >= STALE_AFTER:
            found.append(partial)
    return found
