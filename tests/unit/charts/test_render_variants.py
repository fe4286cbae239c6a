"""Values that change what the chart renders: no plugin, no controllers, insecure TLS, secrets."""

from __future__ import annotations

import base64

from devkit import helm


def test_plugin_disabled_renders_no_node_objects() -> None:
    docs = helm.template(sets=["modelManager.enabled=false"]).docs()
    kinds = {d["kind"] for d in docs}
    assert "DaemonSet" not in kinds and "CSIDriver" not in kinds
    names = {d["metadata"]["name"] for d in docs}
    assert not {n for n in names if n.endswith("-node")}
    assert "Deployment" in kinds and "APIService" in kinds


def test_controllers_off_and_no_leader_election() -> None:
    docs = helm.template(sets=["apiserver.controllers.mode=none"]).docs()
    args = helm.one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--controllers=none" in args and "--leader-elect" not in args
    docs = helm.template(sets=["apiserver.controllers.leaderElect=false"]).docs()
    args = helm.one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--controllers=embedded" in args and "--leader-elect" not in args


def test_insecure_skip_only_when_asked_and_warned() -> None:
    docs = helm.template(sets=["apiserver.apiService.insecureSkipTLSVerify=true"]).docs()
    spec = helm.one(docs, "APIService")["spec"]
    assert spec["insecureSkipTLSVerify"] is True and "caBundle" not in spec
    # NOTES render on install; a client-side dry run needs no cluster
    result = helm.run("install", "model-manager", str(helm.CHART), "--namespace", "x",
                      "--dry-run=client",
                      "--set", "apiserver.apiService.insecureSkipTLSVerify=true")  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "WARNING: apiserver.apiService.insecureSkipTLSVerify=true" in notes
    assert "kind: Role" in notes and "name: model-artifact-reader" in notes
    assert "modelartifacts/progress" in notes


def test_default_notes_carry_no_warning_but_the_tenant_role() -> None:
    result = helm.run("install", "model-manager", str(helm.CHART), "--namespace", "x",
                      "--dry-run=client")  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "WARNING" not in notes
    assert "name: model-artifact-reader" in notes and "python -m conformance" in notes


def test_notes_warn_of_an_emptydir_store_and_say_how_to_upgrade_and_uninstall() -> None:
    def notes(*sets: str) -> str:
        args = [arg for value in sets for arg in ("--set", value)]
        result = helm.run("install", "mm", str(helm.CHART), "--namespace", "x",
                          "--dry-run=client", *args)  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result.stdout.split("NOTES:", 1)[1]

    empty = notes("apiserver.storage.sqlite.persistence.enabled=false")
    assert "WARNING: apiserver.storage.sqlite.persistence.enabled=false keeps the API " in empty
    assert "starts it on an\nempty store" in empty
    for kept in (notes(), notes("apiserver.storage.backend=etcd",
                                "apiserver.storage.etcd.servers={https://etcd:2379}",
                                "apiserver.storage.sqlite.persistence.enabled=false")):
        assert "emptyDir" not in kept
    # the upgrade keeps the release's values; consumer Pods go before the plugin
    assert "helm upgrade mm <chart> -n x --reuse-values" in empty
    found = ("kubectl get pods -A -o custom-columns='NAMESPACE:.metadata.namespace,"
             "NAME:.metadata.name,DRIVERS:.spec.volumes[*].csi.driver'")
    assert found in empty and empty.index(found) < empty.index("helm uninstall mm -n x")


def test_secret_mode_takes_the_bundle_from_values() -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    docs = helm.template(sets=["apiserver.tls.mode=secret", "apiserver.tls.secretName=mine",
                               f"apiserver.tls.caBundle={bundle}"]).docs()  # fmt: skip
    assert not helm.by_kind(docs, "Secret")
    assert helm.one(docs, "APIService")["spec"]["caBundle"] == bundle


def test_secret_mode_with_cert_manager_injection() -> None:
    docs = helm.template(sets=[
        "apiserver.tls.mode=secret", "apiserver.tls.secretName=mine",
        "apiserver.apiService.annotations.cert-manager\\.io/inject-ca-from=gpustack-system/mm",
    ]).docs()  # fmt: skip
    api = helm.one(docs, "APIService")
    assert "caBundle" not in api["spec"]
    assert api["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "gpustack-system/mm"
    }


def test_sqlite_without_persistence_or_with_an_existing_claim() -> None:
    docs = helm.template(sets=["apiserver.storage.sqlite.persistence.enabled=false"]).docs()
    assert not helm.by_kind(docs, "PersistentVolumeClaim")
    pod = helm.one(docs, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "data", "emptyDir": {}} in pod["volumes"]
    docs = helm.template(sets=["apiserver.storage.sqlite.persistence.existingClaim=old"]).docs()
    assert not helm.by_kind(docs, "PersistentVolumeClaim")
    pod = helm.one(docs, "Deployment")["spec"]["template"]["spec"]
    data = next(v for v in pod["volumes"] if v["name"] == "data")
    assert data["persistentVolumeClaim"] == {"claimName": "old"}


def test_release_name_prefixes_every_object() -> None:
    docs = helm.template(release="prod").docs()
    deployment = helm.one(docs, "Deployment")
    assert deployment["metadata"]["name"] == "prod-model-manager"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--settings-configmap=prod-model-manager-settings" in args
    assert helm.one(docs, "APIService")["spec"]["service"]["name"] == "prod-model-manager"
