"""The documents name only what exists: no document outside the repository, and every path,
module, flag and ``make`` target a page names in backticks is one the repository holds.

A page's tokens are its inline code spans (fenced blocks are diagrams and examples). Each failure
names the page, the line and the token, so a stale name is fixed where it is written.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import pathlib
import re
import subprocess
from collections.abc import Iterator

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]

# Built by concatenation, so that this file does not name them itself.
OUTSIDE = ("../" + "shared", "shared/" + "design", "shared/" + "spec", "API" + ".md",
           "ARCHITECTURE" + ".md", "STYLE" + ".md", "BENCHMARKS" + ".md", "artifact" + ".md")
"""Documents of the work around the repository, which a reader of the repository cannot open."""
MACHINE_DEFAULTS = {
    "Makefile": "REGISTRAR_BINARY's default: where this machine keeps the registrar binary",
    "devkit/realnode/rig.py": "MODEL_MANAGER_SHARED_KUBE's default: where this machine keeps "
                              "the real binaries",
}
"""Code defaults for this machine, not documents: the documents name the variables instead."""

PATH_SUFFIXES = (".py", ".md", ".yaml", ".json", ".tpl", ".proto", ".toml")
SCOPES = {
    "controllers.md": "controllers/", "nodeplugin.md": "nodeplugin/", "hub.md": "hub/",
    "kube.md": "kube/", "auth.md": "apiserver/", "api.md": "apiserver/",
    "operations.md": "apiserver/", "conformance.md": "conformance/",
    "kubectl-plugin.md": "kubectlmodel/", "performance.md": "bench/", "fleet.md": "bench/",
}
"""A page's package: a bare file name (``controller.py``) names a file of that package."""
RUNTIME = {
    # what the programs create at run time, under their directories
    "DATA_DIR/": "the API server's --data-dir", ".local/": "make run's data directory",
    "objects/": "the node cache's published trees", "partial/": "the node cache's attempts",
    "state/": "the node cache's state", "trash/": "the node cache's removals",
    "quarantined/": "the node cache's failed checks", "view/": "a mount's view",
    "files/": "the node cache's stored files, each once by its content identity",
    "config.json": "a model repository's file on the hub, not ours",
    "store.db-wake/": "the --processes wake-up FIFOs beside store.db",
    "usage.json": "the node cache's usage record", "store.db": "the SQLite store",
    "tokens.csv": "standalone mode's token file", "policy.yaml": "standalone mode's policy file",
    "kubeconfig": "standalone mode's kubeconfig", "hub-ca-bundle.pem": "the plugin's CA bundle",
    "etcd/gen/": "the etcd stubs make install generates (gitignored)",
    "nodeplugin/csi/gen/": "the CSI stubs make install generates (gitignored)",
    "kv.proto": "etcd's own file, which rpc.proto takes its field numbers from",
}
"""Names that exist once a program ran, each with what makes it."""

EXTERNAL = {
    "kubectl": {"--as", "--as-group", "--raw", "--list", "--server-side", "--validate",
                "--kubeconfig", "--for", "--selector", "--namespace", "--audience"},
    "helm": {"--set", "--install", "--reuse-values", "--namespace", "--create-namespace",
             "--values", "--wait"},
    "kube-apiserver": {"--proxy-client-cert-file", "--proxy-client-key-file"},
    "etcd": {"--auto-compaction-retention"},
    "etcdctl": {"--prefix", "--keys-only"},
    "py-spy": {"--gil", "--native", "--subprocesses", "--idle", "--pid", "--threads"},
    "mount": {"--make-rshared"},
    "metrics-server": {"--kubelet-insecure-tls"},
}
"""Other programs' flags a page may name, by program."""
PARSERS = ("apiserver.flags.cli", "controllers.__main__", "nodeplugin.__main__", "certs.cli",
           "conformance.cli", "kubectlmodel.__main__", "devkit.fixturehub.__main__")
"""Our programs: each module's ``parser()``."""
PACKAGES = ("apiserver", "controllers", "nodeplugin", "openapi", "kube", "hub", "certs",
            "timing", "durable", "tlsserver", "kubectlmodel", "logs", "conformance", "devkit",
            "bench", "demo")

_SPAN = re.compile(r"(`+)(.+?)\1")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_MAKE = re.compile(r"\bmake ([a-z][a-z0-9-]*)")
_BENCH = re.compile(r"\bBENCH=([a-z0-9-]+)")
_DOTTED = re.compile(r"[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def pages() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def spans(page: pathlib.Path) -> Iterator[tuple[int, str]]:
    """(line, code span) outside fenced blocks."""
    fenced = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            for found in _SPAN.finditer(line):
                yield number, found.group(2).strip()


@functools.cache
def tracked() -> tuple[str, ...]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return tuple(listed)


@functools.cache
def tracked_dirs() -> frozenset[str]:
    return frozenset(str(parent) + "/" for path in tracked()
                     for parent in pathlib.PurePosixPath(path).parents if str(parent) != ".")


def _path_token(token: str) -> str | None:
    """The path a span names, or None when it names none (a command, a URL, a pattern)."""
    if " " in token or "://" in token or any(mark in token for mark in "<>{}*$?=") \
            or token[0] in "/#~-.":
        return None if not token.startswith(".local/") else token
    path = token.split("::")[0]
    path = re.sub(r":\d+(-\d+)?$", "", path)
    return path if path.endswith(PATH_SUFFIXES) or path.endswith("/") else None


def path_exists(page: pathlib.Path, path: str) -> bool:
    if any(path == name or path.startswith(name) for name in RUNTIME if name.endswith("/")):
        return True
    if path in RUNTIME:
        return True
    names = tracked_dirs() if path.endswith("/") else frozenset(tracked())
    relative = (page.parent / path).resolve()
    for candidate in (path, str(relative.relative_to(ROOT)) + ("/" if path.endswith("/") else "")
                      if relative.is_relative_to(ROOT) else path):
        if candidate in names:
            return True
    scope = SCOPES.get(page.name, "")
    under = [name for name in names if name.startswith(scope) and ("/" + name).endswith("/" + path)]
    if path.startswith("test_") and "/" not in path:  # a test of the page's package
        return any(name.startswith("tests/") and f"/{scope}" in name
                   and name.endswith("/" + path) for name in names)
    if "/" not in path.rstrip("/"):
        return bool(under)  # a bare name: a file or folder of that name in the page's package
    if len(under) == 1:
        return True
    return len([name for name in names if ("/" + name).endswith("/" + path)]) == 1


@functools.cache
def our_flags() -> frozenset[str]:
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            found.update(flag for flag in action.option_strings if flag.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    for module in PARSERS:
        walk(importlib.import_module(module).parser())
    return frozenset(found)


def flag_exists(flag: str) -> bool:
    external = set().union(*EXTERNAL.values())
    if flag in our_flags() or flag in external:
        return True
    return flag.endswith("-") and any(ours.startswith(flag) for ours in our_flags())


@functools.cache
def chart_values() -> frozenset[str]:
    values = yaml.safe_load((ROOT / "charts/model-manager/values.yaml").read_text())
    found: set[str] = set()

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):
            for key, sub in node.items():
                found.add(prefix + key)
                walk(sub, prefix + key + ".")

    walk(values, "")
    return frozenset(found)


@functools.cache
def rule_ids() -> frozenset[str]:
    found: set[str] = set()
    for path in (ROOT / "conformance").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "rule"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(str(node.args[0].value))
    return frozenset(found)


RENAMED = {
    "apiserver.storage.workers": "the chart value's old name, which values.schema.json refuses "
                                 "naming apiserver.processes",
}
"""Old names a page gives as such, each with what became of it."""


def module_exists(token: str) -> bool:
    """``pkg.module.attribute``: imports and has the attribute, or is a chart value, a
    conformance rule id or a page."""
    if token in chart_values() or token in rule_ids() or token.endswith(".md") or token in RENAMED:
        return True
    parts = token.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                # a field of a class is set on its instances
                return attribute in getattr(found, "__annotations__", {}) \
                    or attribute in getattr(found, "__dataclass_fields__", {})
            found = getattr(found, attribute)
        return True
    return False


def _dotted(token: str) -> str | None:
    name = re.split(r"[(\[ ,:]", token, maxsplit=1)[0].rstrip(".")
    if not _DOTTED.fullmatch(name) or name.split(".")[0] not in PACKAGES:
        return None
    if name.endswith(PATH_SUFFIXES) or "/" in name:
        return None
    return name


@functools.cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([a-z][a-z0-9-]*):", text, re.MULTILINE))


def _problems(check: str) -> list[str]:
    problems = []
    for page in pages():
        where = page.relative_to(ROOT)
        for line, token in spans(page):
            if check == "paths":
                path = _path_token(token)
                if path is not None and not path_exists(page, path):
                    problems.append(f"{where}:{line}: {path}")
            elif check == "flags":
                problems += [f"{where}:{line}: {flag}" for flag in _FLAG.findall(token)
                             if not flag_exists(flag)]
            elif check == "modules":
                name = _dotted(token)
                if name is not None and not module_exists(name):
                    problems.append(f"{where}:{line}: {name}")
            elif check == "make":
                problems += [f"{where}:{line}: make {target}" for target in _MAKE.findall(token)
                             if target not in make_targets()]
                from bench import __main__ as benches

                problems += [f"{where}:{line}: BENCH={name}" for name in _BENCH.findall(token)
                             if name not in benches.available()]
    return problems


SHIPPED = ("apiserver", "controllers", "nodeplugin", "openapi", "kube", "hub", "certs", "timing",
           "durable", "tlsserver", "kubectlmodel", "logs", "conformance", "devkit", "bench")


def docstring_paths() -> Iterator[tuple[str, int, str]]:
    """(module, line, path) of every ``double-backticked`` path in our packages' docstrings."""
    for name in tracked():
        if not name.endswith(".py") or name.split("/")[0] not in SHIPPED:
            continue
        for node in ast.walk(ast.parse((ROOT / name).read_text())):
            if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                              | ast.AsyncFunctionDef):
                continue
            doc = ast.get_docstring(node, clean=False)
            if not doc:
                continue
            line = node.body[0].lineno
            for found in re.finditer(r"``(.+?)``", doc, re.DOTALL):
                path = _path_token(found.group(1).strip())
                if path is not None:
                    yield name, line, path


def docstring_path_exists(module: str, path: str) -> bool:
    """From the root, else a file of the module's own package, else a unique one anywhere."""
    if path_exists(ROOT / "README.md", path):
        return True
    names = tracked_dirs() if path.endswith("/") else frozenset(tracked())
    package = module.split("/")[0] + "/"
    return any(name.startswith(package) and ("/" + name).endswith("/" + path)
               for name in names)


def test_docstrings_name_files_that_exist() -> None:
    problems = [f"{module}:{line}: {path}" for module, line, path in docstring_paths()
                if not docstring_path_exists(module, path)]
    assert problems == [], "paths the docstrings name that do not exist:\n" + "\n".join(
        problems)
    assert not docstring_path_exists("openapi/nodestore.py", "controllers/storesettings.py")


def test_no_document_outside_the_repository() -> None:
    problems = []
    for name in tracked():
        path = ROOT / name
        if name in MACHINE_DEFAULTS or path.suffix in (".json", ".xz", ".gz", ".tar") \
                or name.endswith("test_docs_name_what_exists.py") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            problems += [f"{name}:{number}: {word}" for word in OUTSIDE if word in line]
    assert problems == [], "documents outside the repository:\n" + "\n".join(problems)


@pytest.mark.parametrize("check", ["paths", "flags", "modules", "make"])
def test_every_name_a_page_gives_exists(check: str) -> None:
    problems = _problems(check)
    assert problems == [], f"{check} the documents name that do not exist:\n" + "\n".join(
        problems)


def test_the_checks_catch_a_stale_name(tmp_path: pathlib.Path) -> None:
    """The checks can fail: a moved file, an unknown flag and a missing module are caught."""
    page = ROOT / "docs" / "controllers.md"
    assert not path_exists(page, "clock.py")  # timing/clock.py, not the controllers' own
    assert path_exists(page, "timing/clock.py") and path_exists(page, "controller.py")
    assert path_exists(page, "test_assembly.py") and not path_exists(page, "test_scrub.py")
    assert not path_exists(ROOT / "README.md", "controllers/runner.py")
    assert not path_exists(ROOT / "README.md", "tests/support/realnode/")
    assert path_exists(ROOT / "docs" / "install.md", "../charts/model-manager/README.md")
    assert not flag_exists("--workerz") and flag_exists("--processes")
    assert flag_exists("--etcd-") and not flag_exists("--nothing-")
    assert module_exists("apiserver.flags.config.Settings")
    assert module_exists("apiserver.flags.config.StorageSettings.processes")
    assert not module_exists("apiserver.options.cli")
    assert module_exists("apiserver.processes")  # a chart value
    assert not module_exists("apiserver.storage.etcd.server")


def test_the_readme_names_every_kind_served_and_two_commands() -> None:
    from openapi import resources

    readme = (ROOT / "README.md").read_text()
    missing = [info.kind for info in resources.SERVED
               if info.kind not in readme or f"`{info.plural}`" not in readme]
    assert missing == [], f"README.md does not name these kinds: {missing}"
    block = readme.split("## Two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make run", "make test"]
