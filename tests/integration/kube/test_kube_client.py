"""kube.Client against the fixture control plane: kubeconfig credentials, the raw helper, typed
resources, watch, and every error class."""

from __future__ import annotations

import asyncio
import pathlib
from urllib import parse

import pytest
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Node, Pod
from lightkube.resources.storage_v1 import CSINode

import kube
from devkit.controlplane import ADMIN_TOKEN, ControlPlane, Rule, UserInfo, resources
from devkit.controlplane.pki import Authority


def _client(cp: ControlPlane, tmp_path: pathlib.Path, **credential: object) -> kube.Client:
    path = cp.write_kubeconfig(tmp_path / "kubeconfig", **credential)  # type: ignore[arg-type]
    return kube.Client.from_kubeconfig(path)


async def test_token_kubeconfig_reads_version_and_objects(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as client:
        info = await client.version()
        assert info["gitVersion"] == "v1.36.2"
        assert kube.minor_version(info) == (1, 36)
        created = await client.create(
            ConfigMap(metadata=ObjectMeta(name="settings", namespace="default"), data={"a": "1"})
        )
        assert created.metadata is not None and created.metadata.resourceVersion
        fetched = await client.get(ConfigMap, "settings", namespace="default")
        assert fetched.data == {"a": "1"}
        listed = await client.list(ConfigMap, namespace="default")
        assert [c.metadata.name for c in listed.items if c.metadata] == ["settings"]
        assert int(listed.resource_version) >= int(created.metadata.resourceVersion)


async def test_minor_version_tolerates_provider_suffixes(control_plane: ControlPlane) -> None:
    assert kube.minor_version({"gitVersion": "v1.34.1-gke.100"}) == (1, 34)
    assert kube.minor_version({"major": "1", "minor": "33+"}) == (1, 33)
    with pytest.raises(ValueError):
        kube.minor_version({})


async def test_client_certificate_data_kubeconfig_authenticates(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """kubeadm's admin.conf: CA and client certificate embedded as data, no token at all."""
    pair = control_plane.issue_client_cert("kubernetes-admin", ["kubeadm:cluster-admins"])
    control_plane.policy.bind("cluster-admin-ish", ["kubernetes-admin"], name="unused")
    control_plane.policy.grant("kubernetes-admin", Rule(("*",), ("*",), ("*",)))
    async with _client(control_plane, tmp_path, client=pair) as client:
        answer = await client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json_body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        user = answer.json()["status"]["userInfo"]
        assert user["username"] == "kubernetes-admin"
        assert user["groups"] == ["kubeadm:cluster-admins", "system:authenticated"]
        nodes = await client.list(Node)
        assert nodes.items == []


async def test_wrong_ca_is_refused(control_plane: ControlPlane, tmp_path: pathlib.Path) -> None:
    path = control_plane.write_kubeconfig(tmp_path / "kubeconfig", token=ADMIN_TOKEN)
    other = Authority("someone-else")
    text = path.read_text()
    import base64

    good = base64.b64encode(control_plane.cluster_ca.cert_pem).decode()
    path.write_text(text.replace(good, base64.b64encode(other.cert_pem).decode()))
    async with kube.Client.from_kubeconfig(path) as client:
        with pytest.raises(kube.TLSError) as caught:
            await client.version()
    assert ADMIN_TOKEN not in str(caught.value)
    assert control_plane.recorder.count("/version") == 0


async def test_named_context_is_used(control_plane: ControlPlane, tmp_path: pathlib.Path) -> None:
    import yaml

    path = control_plane.write_kubeconfig(tmp_path / "kubeconfig", token=ADMIN_TOKEN)
    document = yaml.safe_load(path.read_text())
    document["contexts"].append({"name": "broken", "context": {"cluster": "fixture", "user": "x"}})
    document["users"].append({"name": "x", "user": {"token": "not-known"}})
    document["current-context"] = "broken"
    path.write_text(yaml.safe_dump(document))
    async with kube.Client.from_kubeconfig(path, context="fixture") as client:
        assert (await client.version())["major"] == "1"
    async with kube.Client.from_kubeconfig(path) as client:
        with pytest.raises(kube.Unauthorized):
            await client.version()


async def test_missing_kubeconfig_and_context_are_config_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(kube.ConfigError, match="not found"):
        kube.Client.from_kubeconfig(tmp_path / "absent")
    (tmp_path / "k").write_text("apiVersion: v1\nclusters: []\ncontexts: []\nusers: []\n")
    with pytest.raises(kube.ConfigError):
        kube.Client.from_kubeconfig(tmp_path / "k", context="nope")


async def test_errors_are_typed_with_the_status(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    control_plane.add_token("t-alice", UserInfo("alice", uid="alice-uid", groups=("tenants",)))
    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as admin:
        with pytest.raises(kube.NotFound) as missing:
            await admin.get(ConfigMap, "absent", namespace="default")
        assert missing.value.code == 404 and missing.value.reason == "NotFound"
        assert missing.value.message == 'configmaps "absent" not found'
        assert missing.value.details == {"name": "absent", "kind": "configmaps"}

        first = await admin.create(ConfigMap(metadata=ObjectMeta(name="c", namespace="default")))
        with pytest.raises(kube.AlreadyExists):
            await admin.create(ConfigMap(metadata=ObjectMeta(name="c", namespace="default")))
        await admin.patch(ConfigMap, "c", {"data": {"k": "v"}}, namespace="default")
        with pytest.raises(kube.Conflict) as stale:
            await admin.replace(first)
        assert "the object has been modified" in stale.value.message
    async with kube.Client.from_kubeconfig(
        control_plane.write_kubeconfig(tmp_path / "alice", token="t-alice")
    ) as alice:
        with pytest.raises(kube.Forbidden) as refused:
            await alice.list(ConfigMap, namespace="team-b")
        assert refused.value.message == (
            'configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group'
            ' "" in the namespace "team-b"'
        )
    async with kube.Client.from_kubeconfig(
        control_plane.write_kubeconfig(tmp_path / "bad", token="s3cr3t-not-valid")
    ) as bad:
        with pytest.raises(kube.Unauthorized) as unauthorized:
            await bad.version()
        assert "s3cr3t" not in str(unauthorized.value)
        assert unauthorized.value.status["message"] == "Unauthorized"


async def test_outages_are_typed(control_plane: ControlPlane, tmp_path: pathlib.Path) -> None:
    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as client:
        with control_plane.fail(r"^GET /version$", 500, "etcd is sad"):
            with pytest.raises(kube.ServerError) as failed:
                await client.version()
            assert failed.value.code == 500 and failed.value.message == "etcd is sad"
        with control_plane.refuse_connections():
            with pytest.raises(kube.ConnectionFailed) as refused:
                await client.version()
            assert ADMIN_TOKEN not in str(refused.value)
        assert (await client.version())["minor"] == "36"


async def test_node_configz_and_its_failure(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    control_plane.seed(resources.NODES, {"metadata": {"name": "node-a"}})
    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as client:
        with pytest.raises(kube.ServerError) as unreachable:
            await client.node_configz("node-a")
        assert unreachable.value.code == 503 and unreachable.value.reason == "ServiceUnavailable"
        control_plane.set_configz("node-a", {"imageGCHighThresholdPercent": 85})
        answer = await client.node_configz("node-a")
        assert answer == {"kubeletconfig": {"imageGCHighThresholdPercent": 85}}
        with pytest.raises(kube.NotFound):
            await client.node_configz("node-b")


async def test_watch_sees_changes_and_expired_is_typed(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as client:
        pod = Pod(
            metadata=ObjectMeta(name="plugin-a", namespace="default"),
            spec=PodSpec(containers=[Container(name="c", image="i")], nodeName="node-a"),
        )
        listed = await client.list(Pod, namespace="default", fields={"spec.nodeName": "node-a"})
        stream = client.watch(
            Pod, namespace="default", fields={"spec.nodeName": "node-a"},
            resource_version=listed.resource_version, server_timeout=1,
        )  # fmt: skip
        created = await client.create(pod)
        kind, seen = await asyncio.wait_for(anext(stream), 30)
        assert kind == "ADDED" and seen.metadata is not None
        assert created.metadata is not None and seen.metadata.uid == created.metadata.uid
        await client.patch(Pod, "plugin-a", {"metadata": {"labels": {"a": "b"}}},
                           namespace="default")  # fmt: skip
        kind, again = await asyncio.wait_for(anext(stream), 30)
        assert kind == "MODIFIED" and again.metadata is not None
        assert again.metadata.labels == {"a": "b"}
        watches = control_plane.recorder.requests("/api/v1/namespaces/default/pods", "GET")
        assert all("timeoutSeconds=1" in r.query for r in watches if "watch=true" in r.query)
        await stream.aclose()  # type: ignore[attr-defined]

        control_plane.store.compact()
        old = client.watch(Pod, namespace="default", resource_version=listed.resource_version)
        with pytest.raises(kube.Expired) as expired:
            await asyncio.wait_for(anext(old), 30)
        assert expired.value.code == 410


def _labelled_pod(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "gpustack-system", "labels": labels},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "i"}]}}


@pytest.mark.parametrize("bookmarks", [False, True])
async def test_selectors_in_kube_syntax_and_as_mappings_list_and_watch(
    control_plane: ControlPlane, tmp_path: pathlib.Path, bookmarks: bool
) -> None:
    """A selector string (kube's own syntax, as --plugin-pod-selector is given) reaches the
    server as written, for list and watch; a mapping is built by lightkube. The controllers'
    plugin-Pod informer lists exactly so."""
    plugin = {"app.kubernetes.io/name": "model-manager",
              "app.kubernetes.io/component": "node-plugin"}
    control_plane.seed(resources.PODS, _labelled_pod("plugin-a", plugin))
    control_plane.seed(resources.PODS, _labelled_pod("server", {
        "app.kubernetes.io/name": "model-manager", "app.kubernetes.io/component": "server"}))
    control_plane.seed(resources.PODS, _labelled_pod("other", {"app": "other"}))
    text = "app.kubernetes.io/name=model-manager,app.kubernetes.io/component=node-plugin"
    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as client:
        for selector in (text, plugin, f" {text} "):
            found = await client.list(Pod, namespace="gpustack-system", labels=selector)
            assert [p.metadata.name for p in found.items if p.metadata] == ["plugin-a"]
        by_set = await client.list(Pod, namespace="gpustack-system",
                                   labels="app.kubernetes.io/component in (node-plugin,server)")
        assert sorted(p.metadata.name for p in by_set.items if p.metadata) == ["plugin-a",
                                                                               "server"]
        absent = await client.list(Pod, namespace="*", labels="!app,app.kubernetes.io/name")
        assert len(absent.items) == 2
        named = await client.list(Pod, namespace="gpustack-system",
                                  fields="metadata.name=other")
        assert [p.metadata.name for p in named.items if p.metadata] == ["other"]
        everything = await client.list(Pod, namespace="gpustack-system", labels="")
        assert len(everything.items) == 3
        queries = [r.query for r in control_plane.recorder.requests(
            "/api/v1/namespaces/gpustack-system/pods", "GET")]
        assert "labelSelector=app.kubernetes.io%2Fname%3Dmodel-manager%2C" \
               "app.kubernetes.io%2Fcomponent%3Dnode-plugin" in queries[0]

        stream = client.watch(Pod, namespace="gpustack-system", labels=text,
                              resource_version=found.resource_version, bookmarks=bookmarks)
        control_plane.seed(resources.PODS, _labelled_pod("unrelated", {"app": "other"}))
        control_plane.seed(resources.PODS, _labelled_pod("plugin-b", plugin))
        kind, seen = await asyncio.wait_for(anext(stream), 30)
        while kind == "BOOKMARK":
            kind, seen = await asyncio.wait_for(anext(stream), 30)
        assert kind == "ADDED" and seen.metadata is not None
        assert seen.metadata.name == "plugin-b"
        await stream.aclose()  # type: ignore[attr-defined]
        watches = [r.query for r in control_plane.recorder.requests(
            "/api/v1/namespaces/gpustack-system/pods", "GET") if "watch=true" in r.query]
        assert ("allowWatchBookmarks=true" in watches[-1]) is bookmarks
        assert "labelSelector=app.kubernetes.io%2Fname%3Dmodel-manager" in watches[-1]
        with pytest.raises(TypeError):
            await client.list(Pod, labels=["app=x"])  # type: ignore[arg-type]


async def test_bookmarks_of_a_model_that_requires_a_spec(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """A CSINode's model requires ``spec.drivers``, which a BOOKMARK's object holds as null
    (kube-samples/watch-bookmarks.json): the watch hands out a CSINode with the version and no
    drivers instead of failing (a ``Bookmark`` where a server sends metadata alone:
    tests/unit/kube/test_decoding.py); real objects stay typed."""
    control_plane.seed(resources.CSINODES, {"metadata": {"name": "node-a"},
                                            "spec": {"drivers": []}})
    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as client:
        listed = await client.list(CSINode)
        stream = client.watch(CSINode, resource_version=listed.resource_version, bookmarks=True)
        first = asyncio.ensure_future(anext(stream))
        async with asyncio.timeout(30):  # asked again until the open watch has taken one
            while not first.done():
                control_plane.request_bookmark()
                await asyncio.wait([first], timeout=0.2)
        kind, mark = first.result()
        assert kind == "BOOKMARK" and isinstance(mark, CSINode) and mark.spec.drivers == []
        assert mark.metadata is not None and mark.metadata.resourceVersion
        assert mark.to_dict()["kind"] == "CSINode"
        control_plane.seed(resources.CSINODES, {"metadata": {"name": "node-b"},
                                                "spec": {"drivers": [{"name": "d",
                                                                      "nodeID": "node-b"}]}})
        kind, added = await asyncio.wait_for(anext(stream), 30)
        assert kind == "ADDED" and isinstance(added, CSINode)
        assert added.spec.drivers[0].name == "d"
        await stream.aclose()  # type: ignore[attr-defined]


async def test_insecure_skip_tls_verify_is_honoured(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    import yaml

    path = control_plane.write_kubeconfig(tmp_path / "kubeconfig", token=ADMIN_TOKEN)
    document = yaml.safe_load(path.read_text())
    cluster = document["clusters"][0]["cluster"]
    del cluster["certificate-authority-data"]
    cluster["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump(document))
    async with kube.Client.from_kubeconfig(path) as client:
        assert (await client.version())["gitVersion"] == "v1.36.2"
    del cluster["insecure-skip-tls-verify"]
    path.write_text(yaml.safe_dump(document))
    async with kube.Client.from_kubeconfig(path) as client:
        with pytest.raises(kube.TLSError):
            await client.version()


async def test_certificate_authority_file_relative_to_the_kubeconfig(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    import yaml

    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "ca.crt").write_bytes(control_plane.cluster_ca.cert_pem)
    path = control_plane.write_kubeconfig(tmp_path / "conf" / "kubeconfig", token=ADMIN_TOKEN)
    document = yaml.safe_load(path.read_text())
    cluster = document["clusters"][0]["cluster"]
    del cluster["certificate-authority-data"]
    cluster["certificate-authority"] = "ca.crt"
    path.write_text(yaml.safe_dump(document))
    async with kube.Client.from_kubeconfig(path) as client:
        assert (await client.version())["major"] == "1"


async def test_client_certificate_files_authenticate(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    import yaml

    pair = control_plane.issue_client_cert("file-user", ["system:masters"])
    cert, key = pair.write(tmp_path, "client")
    path = control_plane.write_kubeconfig(tmp_path / "kubeconfig", embed_ca=False)
    document = yaml.safe_load(path.read_text())
    document["users"][0]["user"] = {"client-certificate": str(cert), "client-key": str(key)}
    path.write_text(yaml.safe_dump(document))
    async with kube.Client.from_kubeconfig(path) as client:
        await client.list(Node)
    assert control_plane.recorder.requests("/api/v1/nodes")[0].user == "file-user"
    key.unlink()
    with pytest.raises(kube.ConfigError, match="cannot set up TLS"):
        kube.Client.from_kubeconfig(path)


async def test_text_selectors_list_and_watch(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """A selector given as kube's text (``--plugin-pod-selector``) works as a mapping does, in
    list and in both kinds of watch (lightkube itself takes only pairs); sent as written, so a
    malformed one is the server's 400."""
    selector = "app.kubernetes.io/component=node-plugin,tier!=test,zone in (a,b),!legacy"

    def pod(name: str, labels: dict[str, str]) -> Pod:
        return Pod(metadata=ObjectMeta(name=name, namespace="default", labels=labels),
                   spec=PodSpec(containers=[Container(name="c", image="i")]))

    async with _client(control_plane, tmp_path, token=ADMIN_TOKEN) as client:
        for name, labels in (
                ("wanted", {"app.kubernetes.io/component": "node-plugin", "zone": "a"}),
                ("test-tier", {"app.kubernetes.io/component": "node-plugin", "zone": "a",
                               "tier": "test"}),
                ("legacy", {"app.kubernetes.io/component": "node-plugin", "zone": "b",
                            "legacy": "1"}),
                ("elsewhere", {"app.kubernetes.io/component": "node-plugin", "zone": "c"})):
            await client.create(pod(name, labels))
        listed = await client.list(Pod, namespace="default", labels=selector)
        assert [p.metadata.name for p in listed.items if p.metadata] == ["wanted"]
        sent = control_plane.recorder.requests("/api/v1/namespaces/default/pods", "GET")[-1]
        assert parse.parse_qs(sent.query)["labelSelector"] == [
            "app.kubernetes.io/component=node-plugin,tier!=test,zone in (a,b),!legacy"]
        for bookmarks in (False, True):
            stream = client.watch(Pod, namespace="default", labels=selector,
                                  resource_version=listed.resource_version, bookmarks=bookmarks)
            name = f"later-{int(bookmarks)}"
            await client.create(pod(f"{name}-no", {"zone": "a"}))
            await client.create(pod(name, {"app.kubernetes.io/component": "node-plugin",
                                           "zone": "b"}))
            kind, seen = await asyncio.wait_for(anext(stream), 30)
            while kind == "BOOKMARK":
                kind, seen = await asyncio.wait_for(anext(stream), 30)
            assert (kind, seen.metadata.name if seen.metadata else "") == ("ADDED", name)
            await stream.aclose()  # type: ignore[attr-defined]
            listed = await client.list(Pod, namespace="default", labels=selector)
        with pytest.raises(kube.BadRequest, match="unable to parse requirement"):
            await client.list(Pod, namespace="default", labels="a=(b")  # the server's word
