"""docs/performance.md is a reference: every figure a benchmark reports has a row with its
command, today's value, a target (or why none is set) and when and where it was measured; the
page stays short and its history is dated."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "performance.md"
STORAGES = ("sqlite", "etcd")
"""``bench._apiserver.name``'s backends: SQLite keeps the plain name, etcd adds ``-etcd``."""
ETCD_ONLY = {"list-cache": "only etcd has a watch cache to list from (``bench/list.py``)"}
"""Figures one backend never reports, with why."""
_DATE = re.compile(r"^20\d\d-\d\d-\d\d\b")
_MEASURED = re.compile(r"^(20\d\d-\d\d-\d\d, [0-9a-f]{7,40}|not recorded: .+)$")


def _loop_values(loop: ast.For) -> dict[str, list[str]]:
    """``for (a, name) in ((.., "x"), ...)`` or ``for what in ("a", "b")``: each name's values."""
    found: dict[str, list[str]] = {}
    if not isinstance(loop.iter, ast.Tuple):
        return found
    targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
    for row in loop.iter.elts:
        values = row.elts if isinstance(row, ast.Tuple) else [row]
        for target, value in zip(targets, values, strict=False):
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
                found.setdefault(target.id, []).append(str(value.value))
    return found


NAMED = " FIGURES"
"""The key under which a module's declared figure names ride along with the loop values."""


def _declared(tree: ast.Module) -> set[str] | None:
    """A module's ``FIGURES`` tuple: the figure names it reports through a variable no loop
    gives (a name chosen by an environment switch, or by the caller of a shared helper)."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", "") == "FIGURES"
                and isinstance(node.value, ast.Tuple)):
            return {str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)}
    return None


def _name_of(first: ast.expr, loop: dict[str, list[str]]) -> set[str]:
    if isinstance(first, ast.Constant):
        return {str(first.value)}
    if isinstance(first, ast.Call) and getattr(first.func, "attr", "") == "name":
        base = str(first.args[0].value)  # type: ignore[attr-defined]
        return {base if s == "sqlite" else f"{base}-{s}" for s in STORAGES}
    if isinstance(first, ast.Name):
        if first.id not in loop and NAMED in loop:
            return set()  # the module's FIGURES lists the names this variable takes
        return set(loop[first.id])
    if isinstance(first, ast.JoinedStr):
        head = "".join(str(p.value) for p in first.values if isinstance(p, ast.Constant))
        var = next(p.value.id for p in first.values  # type: ignore[attr-defined]
                   if isinstance(p, ast.FormattedValue))
        return {head + value for value in loop[var]}
    raise AssertionError(f"a figure name this test cannot read: {ast.dump(first)}")


def _names_in(source: str) -> set[str]:
    """The figure names one bench module passes to ``result.report``: literals, the API
    benchmarks' ``_apiserver.name(x, storage)``, and names or f-strings taken from the loop
    around the call."""
    names: set[str] = set()

    def visit(node: ast.AST, loop: dict[str, list[str]]) -> None:
        if isinstance(node, ast.For):
            loop = {**loop, **_loop_values(node)}
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "report" and getattr(node.func.value, "id", "") == "result"
                and node.args):
            names.update(_name_of(node.args[0], loop))
        for child in ast.iter_child_nodes(node):
            visit(child, loop)

    tree = ast.parse(source)
    declared = _declared(tree)
    visit(tree, {NAMED: sorted(declared)} if declared is not None else {})
    return names | (declared or set())


def figure_names() -> set[str]:
    found: set[str] = set()
    for path in sorted((ROOT / "bench").glob("*.py")):
        found |= _names_in(path.read_text())
    return found - ETCD_ONLY.keys()


def _section(title: str) -> list[str]:
    lines = PAGE.read_text().splitlines()
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def reference_rows() -> dict[str, list[str]]:
    rows = {}
    for line in _section("## Reference (today's figures)"):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].startswith("`") and cells[1] != "figure":
            rows[cells[1].strip("`")] = cells
    return rows


def test_every_reported_figure_has_a_row() -> None:
    names = figure_names()
    assert {"get", "get-etcd", "mount-warm-today-unp", "start-trees-checked"} <= names
    rows = reference_rows()
    assert sorted(names - rows.keys()) == [], "figures without a row in docs/performance.md"
    assert sorted(rows.keys() - names) == [], "rows of figures no benchmark reports"


def test_every_row_has_a_command_a_target_and_a_date() -> None:
    from bench import __main__ as benches

    problems = []
    for name, (command, _, today, target, measured) in reference_rows().items():
        if command.strip("`") not in benches.available():
            problems.append(f"{name}: {command} is not a make bench BENCH= name")
        if not today:
            problems.append(f"{name}: no figure")
        if not (target.startswith((">", "<", "within", "one copy", "hub bytes"))
                or target.startswith("none set: ")) or target == "none set: ":
            problems.append(f"{name}: the target is neither a bound nor 'none set: <why>'")
        if not _MEASURED.match(measured):
            problems.append(f"{name}: measured is neither 'date, commit' nor 'not recorded: why'")
    assert problems == []


def test_the_page_is_short_and_its_history_dated() -> None:
    assert len(PAGE.read_text().splitlines()) < 350
    entries = [line for line in _section("## Appendix: history") if line.startswith("- ")]
    assert entries and all(_DATE.match(entry[2:]) for entry in entries), entries


def test_the_name_reader_sees_each_form() -> None:
    source = '''
for phase, name in (("publish", "w-today"), ("unpublish", "w-today-unp")):
    result.report(name, 1, "ms", 1, higher_is_better=False)
for what in ("serving", "checked"):
    result.report(f"start-{what}", 1, "s", 1, higher_is_better=False)
result.report(_apiserver.name("get", storage), 1, "ms", 1, higher_is_better=False)
result.report("plain", 1, "s", None, higher_is_better=False)
'''
    assert _names_in(source) == {"w-today", "w-today-unp", "start-serving", "start-checked",
                                 "get", "get-etcd", "plain"}
