"""The doubling backoff has one owner, ``timing.backoff.Backoff``: the reconcile queue, the
informers, the node plugin's failure records and range requests, the resolver's refusals, the
review calls, the worker identity and the storage retries hold one each. A second formula in
product code fails here: a power with a computed exponent (``base * 2 ** failures``), or a value
that multiplies itself in a loop (``delay = min(delay * 2, cap)``, ``delay *= factor``).

``conformance`` is left out: it is black-box by contract and may not import ``timing``."""

from __future__ import annotations

import ast
import pathlib
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[3]
OWNER = REPO / "timing" / "backoff.py"
BLACK_BOX = {"conformance"}
LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _product() -> list[pathlib.Path]:
    with (REPO / "pyproject.toml").open("rb") as handle:
        shipped: list[str] = tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"][
            "include"]
    packages = [name.rstrip("*") for name in shipped if name.rstrip("*") not in BLACK_BOX]
    return [path for package in packages for path in sorted((REPO / package).rglob("*.py"))
            if "/gen/" not in str(path)]


def _constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant))


def _computed_power(node: ast.AST) -> bool:
    """``x ** n``, ``pow(x, n)``, ``math.pow(x, n)`` or ``math.ldexp(x, n)`` with ``n`` not a
    constant (``2**63`` and ``1 << 20`` are sizes, not backoffs)."""
    if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Pow):
        return not _constant(node.right if isinstance(node, ast.BinOp) else node.value)
    if isinstance(node, ast.Call) and len(node.args) >= 2:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("pow", "ldexp") and not _constant(node.args[1])
    return False


def _grows_itself(node: ast.AST) -> bool:
    """``x *= k``, or ``x = ... x * k ...``: a geometric sequence when it runs in a loop."""
    if isinstance(node, ast.AugAssign):
        return isinstance(node.op, ast.Mult)
    if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
        return False
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = {ast.unparse(target) for target in targets}
    return any(isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Mult)
               and {ast.unparse(inner.left), ast.unparse(inner.right)} & names
               for inner in ast.walk(node.value))


def _formulas(source: str, where: str) -> list[str]:
    tree = ast.parse(source, where)
    in_loops = {id(inner) for loop in ast.walk(tree) if isinstance(loop, LOOPS)
                for inner in ast.walk(loop)}
    return [f"{where}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if _computed_power(node) or (id(node) in in_loops and _grows_itself(node))]


def test_no_second_backoff_formula() -> None:
    scanned = [path for path in _product() if path != OWNER]
    assert len(scanned) > 300 and _formulas(OWNER.read_text(), "timing/backoff.py")
    found = [line for path in scanned
             for line in _formulas(path.read_text(), str(path.relative_to(REPO)))]
    assert found == [], "use timing.backoff.Backoff:\n" + "\n".join(found)


def test_the_scan_finds_the_shapes_the_former_copies_had() -> None:
    copies = {
        "queue": "def delay(self, n):\n    return min(self.cap, self.base * 2.0 ** max(0, n - 1))",
        "ranges": "wait = min(policy.cap, policy.base * 2 ** (failures - 1))",
        "pow": "wait = base * pow(2, failures)",
        "storage": "while True:\n    sleep(delay)\n    delay = min(delay * 2, MAX)",
        "webhook": "for _ in range(steps):\n    out.append(delay)\n    delay *= self.factor",
        "attribute": "while True:\n    self.wait = self.wait * 2",
    }
    for name, source in copies.items():
        assert _formulas(source, name), name
    sizes = ("CHUNK = 1 << 20\nLIMIT = 2**63 - 1\nTINY = 2 ** -10\nx = size * 2\n"
             "for part in parts:\n    total = part.size * 2\n    area = width * height")
    assert _formulas(sizes, "sizes") == []
