"""The house: each package is one stage and imports only the stages below it; no cycles; small modules;
the scripted test double is imported by no production module.

Stages, bottom up: ``descriptor`` (the run-record contract and what is computed from run files),
``benchmark`` (tasks and native evaluation), ``mas`` (the runtime), ``attribution`` (on top).
Every import counts: at module level, inside functions, under ``if TYPE_CHECKING:`` and through
``importlib.import_module("literal")`` (an import that runs late is a dependency all the same).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("descriptor", "benchmark", "mas", "attribution")
ALLOWED = {
    "descriptor": {"descriptor"},
    "benchmark": {"benchmark", "descriptor"},
    "mas": {"mas", "benchmark", "descriptor"},
    "attribution": {"attribution", "mas", "benchmark", "descriptor"},
}
MAX_LINES = 500
MAX_MAS_TOP_LEVEL = 12
# Modules over the size limit, each with the work that splits it (an empty dict is the goal).
OVERSIZED: dict[str, str] = {}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _names(node: ast.AST) -> set[str]:
    """Modules a node loads: an import statement (``from pkg import sub`` is ``pkg.sub`` when that is a module,
    a relative import resolved later), or ``importlib.import_module("literal")``."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
        return subs or {node.module}
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return {node.args[0].value}
    return set()


@functools.cache
def imports(path: Path) -> set[str]:
    """Project modules ``path`` imports anywhere: at module level, inside functions, under ``if TYPE_CHECKING:``,
    and through ``importlib.import_module`` with a literal name. An import that runs late is still a dependency."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set().union(*(_names(n) for n in ast.walk(tree)))
    return {m for m in found if m.split(".")[0] in PACKAGES}


MODULES = modules()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_package_imports_only_the_stages_below_it(name):
    stage = name.split(".")[0]
    bad = sorted(m for m in imports(MODULES[name]) if m.split(".")[0] not in ALLOWED[stage])
    assert not bad, f"{name} ({stage}) imports {bad}"


DOUBLE = "mas.scripted"
"""The scripted test double: a provider found through its entry point, never imported by production code."""


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != DOUBLE and not n.startswith(DOUBLE + ".")))
def test_no_production_module_imports_the_scripted_double(name):
    bad = sorted(m for m in imports(MODULES[name]) if m == DOUBLE or m.startswith(DOUBLE + "."))
    assert not bad, f"{name} imports the test double: {bad}"


def test_no_import_cycles():
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for m in imports(path):
            while m and m not in MODULES:
                m = m.rpartition(".")[0]
            if m and m != name:
                targets.add(m)
        graph[name] = targets
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def dfs(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                dfs(nxt, [*stack, nxt])
        state[node] = 2

    for n in sorted(graph):
        if n not in state:
            dfs(n, [n])
    assert not cycles, f"import cycles: {cycles[:5]}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name):
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    if name in OVERSIZED:
        pytest.xfail(OVERSIZED[name])
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines (at most {MAX_LINES})"


def test_mas_top_level_holds_few_modules():
    top = [p for p in (ROOT / "mas").glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= MAX_MAS_TOP_LEVEL, sorted(p.name for p in top)
