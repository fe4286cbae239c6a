"""Stored objects rewritten into the current shape at start, before the controllers run.

ModelPrefetches stored before the pool layer (issue 39) carry ``spec.targets``. Each is written
again through the registry (``update``, with admission), where ``UpgradePrefetchTargets``
converts it (``openapi.kinds.modelprefetch.upgraded``): ``nodeNames`` become
``placement.nodeSelector`` on ``kubernetes.io/hostname``, ``nodeSelector`` its ``matchLabels``,
``minReady`` moves up. It keeps no ``bindingRef``: the controllers do not hold it to stores, and
an administrator may give it one (once). Replicas starting together race harmlessly: a conflict
means another one rewrote it. The same rule converts an old client's body on every write, so the
server never stores the old shape again.
"""

from __future__ import annotations

import logging

from apiserver import errors
from apiserver.registry import build
from openapi.kinds import modelprefetch

log = logging.getLogger(__name__)


async def upgrade_prefetches(registry: build.Registry) -> int:
    """Rewrite every stored prefetch of the old shape; how many were rewritten."""
    listed = await registry.modelprefetches.list("")
    done = 0
    for obj in listed.items():
        if not modelprefetch.has_targets(obj):
            continue
        try:
            await registry.modelprefetches.update(obj)
        except (errors.Conflict, errors.NotFound):
            continue  # rewritten or deleted meanwhile
        except errors.StatusError as exc:
            namespace, name = obj["metadata"].get("namespace"), obj["metadata"].get("name")
            log.warning("ModelPrefetch %s/%s keeps its old shape: %s", namespace, name,
                        exc.message[:300])
            continue
        done += 1
    if done:
        log.info("%d ModelPrefetch(es) rewritten from spec.targets to placement", done)
    return done
