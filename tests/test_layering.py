"""The house: each package is one stage and imports only the stages below it; no cycles; small modules.

Stages, bottom up: ``descriptor`` (the run-record contract and what is computed from run files),
``benchmark`` (tasks and native evaluation), ``mas`` (the runtime), ``attribution`` (on top).
"""

from __future__ import annotations

import ast
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


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _names(node: ast.stmt) -> set[str]:
    """Modules an import statement loads: ``from pkg import sub`` is ``pkg.sub`` when that is a module."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        subs = {f"{node.module}.{a.name}" for a in node.names} & set(MODULES)
        return subs or {node.module}
    return set()


def imports(path: Path, *, top_level_only: bool) -> set[str]:
    """Project modules ``path`` imports (at module level, or anywhere); ``if TYPE_CHECKING:`` blocks skipped."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node)
               for n in ast.walk(node)}
    if top_level_only:  # statements run on import: the module body and its top-level if/try blocks
        nodes = []
        todo = list(tree.body)
        while todo:
            node = todo.pop()
            nodes.append(node)
            if isinstance(node, ast.If | ast.Try) and id(node) not in skipped:
                todo += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                         *(s for h in getattr(node, "handlers", []) for s in h.body)]
    else:
        nodes = list(ast.walk(tree))
    found = set().union(*(_names(n) for n in nodes if id(n) not in skipped and isinstance(n, ast.stmt)))
    return {m for m in found if m.split(".")[0] in PACKAGES}


MODULES = modules()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_package_imports_only_the_stages_below_it(name):
    stage = name.split(".")[0]
    bad = sorted(m for m in imports(MODULES[name], top_level_only=False) if m.split(".")[0] not in ALLOWED[stage])
    assert not bad, f"{name} ({stage}) imports {bad}"


def test_no_import_cycles():
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for m in imports(path, top_level_only=True):
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
