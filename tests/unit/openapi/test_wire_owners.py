"""Every wire name two parts share has one owner in ``openapi`` and no module spells it again.

The owners are the contract's vocabulary modules (``OWNERS``); their words are every public
UPPER_CASE ``str`` or ``int`` constant, collected by import. A word is scanned when it is
distinctive (an uppercase letter, a ``/``, ``.`` or ``-``; an int from 1024 that is not a power of
two, so a port and not a size), plus every source kind. A constant equal to a scanned word
anywhere else in the product, the demo and the benchmarks fails, naming the line and the owner to
import, unless ``ALLOWED`` says why that spelling is another word. Inside ``openapi`` a word that
is also a field of a view (``manifestDigest``) may name that field.

Also: ``Obj`` (an untyped wire object) is defined once, in ``openapi/wire.py``.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import typing
from collections.abc import Iterator

from openapi import kinds, plugin, sources, volume
from tests.support import sourcescan

OWNERS = ("reasons", "sources", "states", "volume", "plugin", "keys", "install", "resources",
          "anchors")

_TLS_FILE = ("a file, or a key of a kubernetes.io/tls Secret, named ca.crt by kube's convention: "
             "not the key of the CA-bundle ConfigMap the settings name")
_POD_WORD = "a Pod's phase or condition: kube's word, not our state of the same spelling"
ALLOWED: dict[tuple[str, object], str] = {
    ("apiserver/endpoints/health.py", "model-manager"):
        "the Python distribution's name (importlib.metadata), not the chart's label value",
    ("apiserver/wiring/kubeconfig.py", "model-manager"):
        "the context name inside the kubeconfig files standalone mode writes",
    ("apiserver/wiring/standalone.py", "node-plugin"):
        "the user name inside the plugin's standalone kubeconfig file, not the Pods' component",
    ("hub/huggingface.py", "RevisionNotFound"):
        "the Hugging Face Hub's own X-Error-Code header value, which our reason happens to copy",
    ("hub/huggingface.py", "EntryNotFound"):
        "the Hugging Face Hub's own X-Error-Code header value, which our reason happens to copy",
    ("certs/authority.py", "ca.crt"): _TLS_FILE,
    ("certs/cluster.py", "ca.crt"): _TLS_FILE,
    ("certs/expiry.py", "ca.crt"): _TLS_FILE,
    ("kube/config.py", "ca.crt"):
        "the CA file of kube's in-cluster service-account directory",
    ("bench/pod_start.py", "Failed"): _POD_WORD,
    ("devkit/controlplane/store.py", "Pending"):
        "a new Pod's and claim's phase, as the fixture control plane sets it: kube's word",
    ("devkit/controlplane/files.py", "ca.crt"): _TLS_FILE,
    ("devkit/harness/apiserver.py", "ca.crt"): _TLS_FILE,
    ("devkit/controlplane/plane.py", "image"): "a container's image field (kube's Pod spec)",
    ("bench/hollow/cluster.py", "ca.crt"): _TLS_FILE,
    ("bench/hollow/cluster.py", "Available"):
        "the APIService's condition (kube's aggregator), not a prefetch's condition",
    ("bench/hollow/cluster.py", "image"): "a container's image field (kube's Pod spec)",
    ("devkit/fixturehub/hfroutes.py", "RevisionNotFound"):
        "the X-Error-Code the fixture hub answers, as the Hugging Face Hub does",
    ("devkit/fixturehub/hfroutes.py", "EntryNotFound"):
        "the X-Error-Code the fixture hub answers, as the Hugging Face Hub does",
    ("devkit/helm.py", "model-manager"):
        "the chart's directory and the Helm release name the tests install",
    ("devkit/realnode/release_values.py", "model-manager"): "the Helm release name of the rig",
    ("devkit/realnode/release_values.py", "image"): "the chart's image values, not a source",
    ("devkit/realnode/deploy.py", "model-manager"): "the name of the product's image archive",
    ("devkit/realnode/deploy.py", "image"): "the image build's subcommand, not a source",
    ("controllers/prefetches/warmup.py", "Failed"): _POD_WORD,
    ("controllers/sources/plugins.py", "Ready"): _POD_WORD,
    ("controllers/prefetches/placement.py", "Pending"): _POD_WORD,
    ("controllers/prefetches/placement.py", "Unschedulable"):
        "the reason kube-scheduler gives a Pod's PodScheduled condition: kube's word, which our "
        "prefetch reason copies",
}
"""(file, word): why that spelling is not the owner's word. May only shrink."""


def _vocabulary() -> dict[object, set[str]]:
    """word -> the owner modules that define it."""
    words: dict[object, set[str]] = {}
    for owner in OWNERS:
        module = importlib.import_module(f"openapi.{owner}")
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str | int) and not isinstance(value, bool):
                words.setdefault(value, set()).add(f"openapi/{owner}.py")
    return words


def _distinctive(word: object) -> bool:
    if isinstance(word, int):
        return word >= 1024 and word & (word - 1) != 0
    assert isinstance(word, str)
    return word in sources.KINDS or any(c.isupper() or c in "/.-" for c in word)


def _view_fields() -> set[str]:
    """The keys of every TypedDict in the contract's view modules."""
    found: set[str] = set()
    modules = [importlib.import_module(f"openapi.kinds.{name}")
               for name in ("modelartifact", "nodemodelstore", "modelprefetch", "progress")]
    for module in (*modules, plugin, volume):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, dict) and hasattr(value, "__total__"):
                found |= set(typing.get_type_hints(value))
    return found


WORDS = {word: owners for word, owners in _vocabulary().items() if _distinctive(word)}
FIELDS = _view_fields()


def _hits(path: pathlib.Path) -> Iterator[tuple[int, object, set[str]]]:
    here = sourcescan.relative(path)
    inside = here.startswith("openapi/")
    for node in sourcescan.constants(path):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, str | int):
            continue
        owners = WORDS.get(value)
        if not owners or here in owners or (inside and value in FIELDS):
            continue
        yield node.lineno, value, owners


def test_no_module_spells_a_wire_name_of_another_owner() -> None:
    scanned = sourcescan.files()
    assert len(scanned) > 300 and len(WORDS) > 80
    found, used = [], set()
    for path in scanned:
        for line, value, owners in _hits(path):
            key = (sourcescan.relative(path), value)
            if key in ALLOWED:
                used.add(key)
                continue
            found.append(f"{key[0]}:{line}: {value!r} -> {' or '.join(sorted(owners))}")
    assert found == [], "take the name from its owner:\n" + "\n".join(found)
    assert set(ALLOWED) - used == set(), "spelled no more: drop it from ALLOWED"


def test_the_scan_finds_the_owners_words() -> None:
    for owner in OWNERS:
        path = sourcescan.REPO / "openapi" / f"{owner}.py"
        spelled = {node.value for node in sourcescan.constants(path)}
        mine = {word for word, owners in WORDS.items() if f"openapi/{owner}.py" in owners}
        assert mine & spelled, f"the scan finds {owner}'s own words"
    assert {"artifactUID", "manifestDigest", "SourceUnavailable", "Ready", 32444,
            "model-manager-settings", sources.IMAGE} <= set(WORDS)
    assert "artifact" not in WORDS and "token" not in WORDS and 1024 not in WORDS


def _obj_aliases(path: pathlib.Path) -> Iterator[int]:
    for node in sourcescan.tree(path).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            value = ast.unparse(node.value) if node.value is not None else ""
            if "Obj" in names or value in ("dict[str, Any]", "dict[str, typing.Any]"):
                yield node.lineno


def test_one_obj() -> None:
    owner = "openapi/wire.py"
    scanned = sourcescan.files() + sourcescan.files(("tests/support",))
    found = [f"{sourcescan.relative(path)}:{line}" for path in scanned
             for line in _obj_aliases(path)
             if sourcescan.relative(path) not in (owner, "openapi/schema.py")]
    assert list(_obj_aliases(sourcescan.REPO / owner)), "the scan finds the one definition"
    assert found == [], "use openapi.wire.Obj:\n" + "\n".join(found)
    assert kinds.__doc__
