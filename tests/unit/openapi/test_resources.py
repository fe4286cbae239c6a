"""The served resources: names, scope, verbs and subresources discovery and routing rely on."""

from openapi import resources


def test_model_artifact_names_and_verbs() -> None:
    info = resources.MODEL_ARTIFACT
    assert info.group_version == "worker.gpustack.ai/v1"
    assert (info.kind, info.list_kind, info.plural, info.singular) == (
        "ModelArtifact", "ModelArtifactList", "modelartifacts", "modelartifact")
    assert info.short_names == ("mart",)
    assert info.categories == ("gpustack",)
    assert info.namespaced
    assert set(info.verbs) == {"create", "delete", "get", "list", "patch", "update", "watch"}
    assert "deletecollection" not in info.verbs
    assert info.group_resource == "modelartifacts.worker.gpustack.ai"


def test_model_artifact_subresources() -> None:
    progress = resources.MODEL_ARTIFACT.subresource("progress")
    status = resources.MODEL_ARTIFACT.subresource("status")
    assert progress is not None and progress.verbs == ("get",)
    assert progress.kind == "ModelArtifactProgress" and progress.discovered
    # The status path serves an out-of-process worker only; discovery does not list it.
    assert status is not None and set(status.verbs) == {"get", "patch", "update"}
    assert not status.discovered
    assert resources.MODEL_ARTIFACT.subresource("scale") is None


def test_node_model_store_is_cluster_scoped_and_read_delete_only() -> None:
    info = resources.NODE_MODEL_STORE
    assert not info.namespaced
    assert info.short_names == ("nms",)
    assert info.categories == ("gpustack",)
    assert set(info.verbs) == {"delete", "get", "list", "watch"}
    status = info.subresource("status")
    assert status is not None and status.discovered
    assert set(status.verbs) == {"get", "patch", "update"}


def test_model_prefetch_is_namespaced_with_a_worker_only_status() -> None:
    info = resources.MODEL_PREFETCH
    assert (info.kind, info.list_kind, info.plural, info.singular) == (
        "ModelPrefetch", "ModelPrefetchList", "modelprefetches", "modelprefetch")
    assert info.namespaced and info.short_names == ("mpf",) and info.categories == ("gpustack",)
    assert set(info.verbs) == {"create", "delete", "get", "list", "patch", "update", "watch"}
    assert "deletecollection" not in info.verbs
    status = info.subresource("status")
    assert status is not None and set(status.verbs) == {"get", "patch", "update"}
    assert not status.discovered  # the worker's, like the ModelArtifact's
    assert [sub.name for sub in info.subresources] == ["status"]


def test_lookup_tables() -> None:
    assert resources.BY_PLURAL == {
        "modelartifacts": resources.MODEL_ARTIFACT,
        "nodemodelstores": resources.NODE_MODEL_STORE,
        "modelprefetches": resources.MODEL_PREFETCH,
        "modelstores": resources.MODEL_STORE,
        "modelstorebindings": resources.MODEL_STORE_BINDING,
    }
    progress = resources.BY_KIND["ModelArtifactProgress"]
    assert progress is resources.MODEL_ARTIFACT_PROGRESS
    assert not progress.stored
    assert progress.verbs == ("get",)
