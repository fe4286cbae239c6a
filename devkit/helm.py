"""Run the real Helm 4 binary (installed by ``make install`` into the virtualenv) on the chart."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from openapi import install

REPO = pathlib.Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "model-manager"
FULL_VALUES = CHART / "ci" / "full-values.yaml"
NAMESPACE = install.DEFAULT_NAMESPACE


def binary() -> pathlib.Path:
    """The virtualenv's helm (``.ci/install-helm``), else one on PATH; never silently absent."""
    beside = pathlib.Path(sys.executable).parent / "helm"
    if beside.exists():
        return beside
    found = shutil.which("helm")
    if found is None:
        raise RuntimeError("helm is not installed: run make install (it runs .ci/install-helm)")
    return pathlib.Path(found)


@dataclasses.dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    def docs(self) -> list[dict[str, Any]]:
        return [doc for doc in yaml.safe_load_all(self.stdout) if doc]


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    home = REPO / ".local" / "helm-home"  # keep helm's cache/config out of the user's home
    environment = dict(os.environ, HELM_CACHE_HOME=str(home / "cache"),
                       HELM_CONFIG_HOME=str(home / "config"),
                       HELM_DATA_HOME=str(home / "data"), **(env or {}))  # fmt: skip
    done = subprocess.run([str(binary()), *args], capture_output=True, text=True, timeout=120,
                          env=environment, check=False)  # fmt: skip
    return Result(done.returncode, done.stdout, done.stderr)


def template(
    *,
    values: Sequence[pathlib.Path] = (),
    sets: Sequence[str] = (),
    release: str = "model-manager",
    check: bool = True,
    kube_version: str = "",
) -> Result:
    """``helm template``; ``kube_version``: the cluster's version the chart sees (Helm's own
    default when empty)."""
    args = ["template", release, str(CHART), "--namespace", NAMESPACE]
    if kube_version:
        args += ["--kube-version", kube_version]
    for path in values:
        args += ["--values", str(path)]
    for item in sets:
        args += ["--set", item]
    result = run(*args)
    if check and result.returncode != 0:
        raise AssertionError(f"helm template failed ({result.returncode}):\n{result.stderr}")
    return result


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def pod_spec(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, kind)["spec"]["template"]["spec"]
    return spec


def container(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in pod_spec(docs, kind)["containers"] if c["name"] == name
    ]
    assert len(found) == 1, f"{kind} has no container {name}"
    return found[0]


_FIELDS = {"metadata.namespace": NAMESPACE, "metadata.name": "model-manager-pod-0",
           "spec.nodeName": "node-a", "status.podIP": "10.244.0.17"}


def expanded_args(spec: dict[str, Any], *, fields: dict[str, str] | None = None) -> list[str]:
    """A container's args as kubelet runs them: ``$(VAR)`` replaced by the container's env
    (``value`` or a ``fieldRef`` from ``fields``), ``$$`` kept as one ``$``, an undefined
    reference left as written (kube's rules)."""
    known = {**_FIELDS, **(fields or {})}
    env: dict[str, str] = {}
    for var in spec.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif "fieldRef" in (var.get("valueFrom") or {}):
            env[var["name"]] = known[var["valueFrom"]["fieldRef"]["fieldPath"]]

    def expand(text: str) -> str:
        out, i = [], 0
        while i < len(text):
            if text.startswith("$$", i):
                out.append("$")
                i += 2
            elif text.startswith("$(", i) and (end := text.find(")", i)) > 0 \
                    and text[i + 2:end] in env:
                out.append(env[text[i + 2:end]])
                i = end + 1
            else:
                out.append(text[i])
                i += 1
        return "".join(out)

    return [expand(str(arg)) for arg in spec.get("args") or []]
