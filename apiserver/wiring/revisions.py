"""Where the server keeps its revision mark (``storage.marks``): always a file beside the store
(``store.db-mark`` beside SQLite's ``store.db``; ``etcd-revision-mark`` in the data directory on
etcd), and in a cluster also the controllers' Lease in kube-apiserver
(``cluster.revisionmark``), which outlives the Pod and its volumes; there a fence is also told
with an Event about that Lease."""

from __future__ import annotations

import functools
import pathlib

import kube
from apiserver.cluster import revisionmark
from apiserver.flags import config
from apiserver.storage import interface, marks


def mark_file(settings: config.Settings) -> pathlib.Path:
    if settings.storage.backend == "etcd":
        return settings.data_dir / "etcd-revision-mark"
    return settings.storage_path.with_name(settings.storage_path.name + "-mark")


def guarded(settings: config.Settings, backend: interface.Store,
            cluster_client: kube.Client | None) -> marks.Guarded:
    kept: list[marks.Mark] = [marks.FileMark(mark_file(settings))]
    on_fence: marks.OnFence | None = None
    if cluster_client is not None:
        cs = settings.controller_settings
        lease = revisionmark.LeaseMark(cluster_client, namespace=cs.namespace,
                                       name=cs.lease_name)
        kept.append(lease)
        on_fence = functools.partial(revisionmark.tell, cluster_client, lease)
    return marks.Guarded(backend, kept, on_fence=on_fence)
