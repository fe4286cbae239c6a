"""values.schema.json: bad values fail at install with a message naming the value; the defaults,
values.yaml and the README table agree."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml

from devkit import helm


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("apiserver.replicas=0", "/apiserver/replicas"),
        ("apiserver.typo=1", "additional properties 'typo' not allowed"),
        ("apiserver.storage.backend=mysql", "/apiserver/storage/backend"),
        ("apiserver.processes=0", "/apiserver/processes"),
        ("apiserver.storage.workers=2", "apiserver.storage.workers is now apiserver.processes"),
        ("apiserver.tls.mode=manual", "/apiserver/tls/mode"),
        ("apiserver.tls.caBundle=not*base64", "/apiserver/tls/caBundle"),
        ("apiserver.storage.etcd.servers[0]=etcd:2379", "/apiserver/storage/etcd/servers/0"),
        ("apiserver.extraArgs[0]=oops", "/apiserver/extraArgs/0"),
        ("apiserver.controllers.mode=sometimes", "/apiserver/controllers/mode"),
        ("apiserver.controllers.prefetchWarmupImage=",
         "/apiserver/controllers/prefetchWarmupImage"),
        ("apiserver.controllers.prefetchWarmupRetryInterval=5 minutes",
         "/apiserver/controllers/prefetchWarmupRetryInterval"),
        ("settings.model-store-high-watermark=99", "/settings/model-store-high-watermark"),
        ("settings.model-store-download-concurrency=65",
         "/settings/model-store-download-concurrency"),
        ("settings.model-store-download-bandwidth=fast",
         "/settings/model-store-download-bandwidth"),
        ("settings.model-artifact-https-proxy=http://user:pw@proxy:3128",
         "/settings/model-artifact-https-proxy"),
        ("settings.model-artifact-revalidate-interval=daily",
         "/settings/model-artifact-revalidate-interval"),
        ("settings.unknown-setting=1", "additional properties 'unknown-setting' not allowed"),
        ("settings.model-store-peer-sync=yes", "/settings/model-store-peer-sync"),
        ("modelManager.securePort=70000", "/modelManager/securePort"),
        ("modelManager.port=70000", "/modelManager/port"),
        ("modelManager.port=-1", "/modelManager/port"),
        ("modelManager.networkPolicy.enabled=true",
         "additional properties 'networkPolicy' not allowed"),
        ("modelManager.peerSync.enabled=yes", "/modelManager/peerSync/enabled"),
        ("modelManager.peerSync.maxServingStreams=0", "/modelManager/peerSync/maxServingStreams"),
        ("modelManager.peerSync.streamsPerSource=4",
         "additional properties 'streamsPerSource' not allowed"),
        ("modelManager.peerSync.networkPolicy.securePortFrom[0]=everyone",
         "/modelManager/peerSync/networkPolicy/securePortFrom/0"),
        ("modelManager.rootPath=relative/path", "/modelManager/rootPath"),
        ("modelManager.kubeletDir=/var/lib/kubelet/", "/modelManager/kubeletDir"),
        ("modelManager.enabled=yes-please", "/modelManager/enabled"),
        ("modelManager.registrar.image=", "/modelManager/registrar/image"),
        ("modelManager.resources.requests=lots", "/modelManager/resources/requests"),
        ("serviceAccount.worker.name=Not_A_Name", "/serviceAccount/worker/name"),
    ],
)
def test_schema_violations_fail_naming_the_value(setting: str, message: str) -> None:
    result = helm.template(sets=[setting], check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["apiserver.replicas=2"], "apiserver.replicas > 1 needs apiserver.storage.backend=etcd"),
        (["apiserver.processes=2", "apiserver.replicas=2"],
         "apiserver.replicas > 1 needs apiserver.storage.backend=etcd"),
        (["settings.model-store-peer-sync=true"],
         "settings.model-store-peer-sync (true) contradicts modelManager.peerSync.enabled "
         "(false, with modelManager.enabled true)"),
        (["settings.model-store-peer-sync=false", "modelManager.peerSync.enabled=true"],
         "settings.model-store-peer-sync (false) contradicts modelManager.peerSync.enabled"),
        (["settings.model-store-peer-sync=true", "modelManager.peerSync.enabled=true",
          "modelManager.enabled=false"],
         "contradicts modelManager.peerSync.enabled (true, with modelManager.enabled false)"),
        (["apiserver.storage.backend=etcd"], "needs apiserver.storage.etcd.servers"),
        (["apiserver.tls.mode=secret"], "needs apiserver.tls.secretName"),
        (["apiserver.tls.mode=secret", "apiserver.tls.secretName=x"],
         "set apiserver.tls.caBundle"),
        (["settings.model-store-low-watermark=80"],
         "model-store-low-watermark (80) must be below settings.model-store-high-watermark (80)"),
        (["modelManager.peerSync.enabled=true", "modelManager.port=0"],
         "modelManager.peerSync.enabled needs a peer port: set modelManager.port"),
        (["modelManager.peerSync.enabled=true", "modelManager.port=32444"],
         "modelManager.port (32444) must differ from modelManager.securePort (32444)"),
        (["modelManager.peerSync.enabled=true", "modelManager.port=9809"],
         "and modelManager.registrar.healthPort (9809)"),
    ],
)
def test_combinations_the_schema_cannot_express(settings: list[str], message: str) -> None:
    result = helm.template(sets=settings, check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_sqlite_runs_several_processes_in_its_one_pod() -> None:
    """``--processes N`` shares the one store.db (docs/architecture.md); replicas stay refused."""
    docs = helm.template(sets=["apiserver.processes=3"]).docs()
    args = helm.container(docs, "Deployment", "apiserver")["args"]
    assert "--storage=sqlite" in args and "--processes=3" in args
    assert helm.one(docs, "Deployment")["spec"]["replicas"] == 1


@pytest.mark.parametrize(("sets", "key"), [
    ([], "false"),
    (["modelManager.peerSync.enabled=true"], "true"),
    (["modelManager.peerSync.enabled=true", "settings.model-store-peer-sync=true"], "true"),
    (["settings.model-store-peer-sync=false"], "false"),
    (["settings.model-store-peer-sync=null", "modelManager.peerSync.enabled=true"], "true"),
    (["modelManager.peerSync.enabled=true", "modelManager.enabled=false"], "false"),
])  # fmt: skip
def test_the_peer_sync_setting_says_what_the_switch_runs(sets: list[str], key: str) -> None:
    docs = helm.template(sets=sets).docs()
    data = helm.one(docs, "ConfigMap", "model-manager-settings")["data"]
    assert data["model-store-peer-sync"] == key
    daemonsets = helm.by_kind(docs, "DaemonSet")
    runs = bool(daemonsets) and any(
        a.startswith("--peer-port=") for a in helm.container(docs, "DaemonSet", "plugin")["args"])
    assert runs is (key == "true")


def test_a_port_of_0_is_accepted_while_peer_sync_is_off() -> None:
    """Values files of earlier releases (which accepted only 0) still install."""
    assert helm.template(sets=["modelManager.port=0"]).returncode == 0


def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((helm.CHART / "values.schema.json").read_text())
    return loaded


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, sub in schema["properties"].items():
        if sub.get("deprecated"):  # an old name the schema refuses: no value of its own
            continue
        if sub.get("type") == "object" and "properties" in sub and "default" not in sub:
            tree[name] = _defaults(sub)
        else:
            tree[name] = sub["default"]
    return tree


def test_values_yaml_equals_the_schema_defaults() -> None:
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    assert values == _defaults(_schema())


def test_every_schema_leaf_is_described() -> None:
    def walk(schema: dict[str, Any], prefix: str = "") -> list[str]:
        missing = []
        for name, sub in schema["properties"].items():
            if sub.get("type") == "object" and "properties" in sub and "default" not in sub:
                missing += walk(sub, f"{prefix}{name}.")
            elif not sub.get("description"):
                missing.append(f"{prefix}{name}")
        return missing

    assert walk(_schema()) == []


def test_readme_table_is_generated_from_the_schema() -> None:
    result = subprocess.run([sys.executable, str(helm.CHART / "readme.py"), "--check"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    readme = (helm.CHART / "README.md").read_text()
    for key in ("`modelManager.registrar.image`", "`apiserver.storage.etcd.servers`",
                "`settings.model-store-download-bandwidth`"):  # fmt: skip
        assert key in readme


def test_the_readme_check_notices_a_stale_table(tmp_path: Any) -> None:
    sys.path.insert(0, str(helm.CHART))
    try:
        import readme  # the chart's generator, a plain script
    finally:
        sys.path.remove(str(helm.CHART))
    schema = _schema()
    current = (helm.CHART / "README.md").read_text()
    assert readme.render(current, schema) == current
    schema["properties"]["nameOverride"]["description"] = "changed"
    assert readme.render(current, schema) != current
