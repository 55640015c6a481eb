"""The house: each package is one stage and imports only the stages below it; no cycles; small modules;
only public names cross modules; the scripted test double is imported by no production module, and its answers
are defined in its own package only.

Stages, bottom up: ``descriptor`` (the run-record contract and what is computed from run files),
``benchmark`` (tasks and native evaluation), ``mas`` (the runtime), ``attribution``, and on top ``mas_econ``, the
command line. A command's module (the one a stage's declaration names, or a hook adding options to a command) is
imported by the command line only: what commands share lives in library modules.
Every import counts: at module level, inside functions, under ``if TYPE_CHECKING:``, through
``importlib.import_module("literal")`` and through a lazy package face's name -> module table
(``lazy_exports``): an import that runs late is a dependency all the same.

Package faces count: ``from pkg import sub`` runs ``pkg/__init__.py`` and reads ``sub`` from it, so it depends on
the face ``pkg`` as well as on ``pkg.sub``; a face depends on what it imports or lazily exports. A module inside
a package imports its siblings (``from pkg.sub import name``), never its own package's face.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("descriptor", "benchmark", "mas", "attribution", "mas_econ")
ALLOWED = {
    "descriptor": {"descriptor"},
    "benchmark": {"benchmark", "descriptor"},
    "mas": {"mas", "benchmark", "descriptor"},
    "attribution": {"attribution", "mas", "benchmark", "descriptor"},
    "mas_econ": {"mas_econ", "attribution", "mas", "benchmark", "descriptor"},
}
TOP = "mas_econ"
"""The command line: it gathers every stage's commands and imports only the one that runs."""
MAX_LINES = 500
MAX_MAS_TOP_LEVEL = 12
# Modules over the size limit, each with the work that splits it (an empty dict is the goal).
OVERSIZED: dict[str, str] = {}
# Modules importing another module's private name, each with the work that ends it (an empty dict is the goal).
PRIVATE_IMPORTS: dict[str, str] = {}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _names(node: ast.AST) -> set[str]:
    """Modules a node loads: an import statement (``from pkg import sub`` is the face ``pkg`` and ``pkg.sub``
    when that is a module), or ``importlib.import_module("literal")``."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        assert node.level == 0, "relative import: the project imports by absolute name"
        return {node.module} | ({f"{node.module}.{a.name}" for a in node.names} & MODULES.keys())
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return {node.args[0].value}
    return set()


def _lazy_exports(tree: ast.Module) -> set[str]:
    """The modules a lazy face serves (``__getattr__ = lazy_exports(__name__, {name: module})``, the table given
    inline or as a module-level name)."""
    tables = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name)}
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports" and len(node.args) == 2:
            table = node.args[1]
            table = tables.get(table.id) if isinstance(table, ast.Name) else table
            assert isinstance(table, ast.Dict), "lazy_exports takes a literal table: the layering reads it"
            out |= {v.value for v in table.values if isinstance(v, ast.Constant)}
    return out


@functools.cache
def imports(path: Path) -> set[str]:
    """Project modules ``path`` imports anywhere: at module level, inside functions, under ``if TYPE_CHECKING:``,
    through ``importlib.import_module`` with a literal name and through a lazy face's table. An import that runs
    late is still a dependency."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set().union(*(_names(n) for n in ast.walk(tree))) | _lazy_exports(tree)
    return {m for m in found if m.split(".")[0] in PACKAGES}


MODULES = modules()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_package_imports_only_the_stages_below_it(name):
    stage = name.split(".")[0]
    bad = sorted(m for m in imports(MODULES[name]) if m.split(".")[0] not in ALLOWED[stage])
    assert not bad, f"{name} ({stage}) imports {bad}"


@functools.cache
def command_modules() -> frozenset[str]:
    """The modules of the stages' declared commands and of the hooks adding options to them."""
    from descriptor.commands import hooks_of
    from mas_econ.cli import commands

    found = {c.module for _, c in commands()} | {m for name, _ in commands() for m in hooks_of(name)}
    return frozenset(m for m in found if m.split(".")[0] in PACKAGES)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.split(".")[0] != TOP))
def test_no_stage_module_imports_a_commands_module(name):
    commands = command_modules()
    assert commands >= {"mas.cli", "attribution.cli.sweep", "descriptor.cli"}  # the check sees the commands
    bad = sorted(m for m in imports(MODULES[name]) if m in commands and m != name)
    assert not bad, f"{name} imports the command module(s) {bad}: move what it needs into a library module"


DOUBLE = "mas.scripted"
"""The scripted test double: a provider found through its entry point, never imported by production code."""


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != DOUBLE and not n.startswith(DOUBLE + ".")))
def test_no_production_module_imports_the_scripted_double(name):
    bad = sorted(m for m in imports(MODULES[name]) if m == DOUBLE or m.startswith(DOUBLE + "."))
    assert not bad, f"{name} imports the test double: {bad}"


def scripted_answers(tree: ast.AST) -> list[str]:
    """Where ``tree`` defines a scripted answer: a ``responder(...)`` call or decorator (bare or as an attribute),
    or a ``RESPONDERS.register`` call; line numbers."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = func.value if isinstance(func, ast.Attribute) else None
        if name == "responder" or (name == "register" and isinstance(owner, ast.Name) and owner.id == "RESPONDERS"):
            found.append(node.lineno)
    return [f"line {n}" for n in sorted(found)]


def test_the_answer_check_sees_each_way_of_registering_an_answer():
    source = ("@responder('a.b')\ndef f(ctx): ...\nscripting.responder('c.d')(f)\n"
              "RESPONDERS.register('e.f', x)\nBENCHMARKS.register('arith')\n")
    assert scripted_answers(ast.parse(source)) == ["line 1", "line 3", "line 4"]


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != DOUBLE and not n.startswith(DOUBLE + ".")))
def test_no_module_outside_the_double_defines_a_scripted_answer(name):
    """The double's answers live in its own package, keyed by contract; a production module only sends prompts."""
    found = scripted_answers(ast.parse(MODULES[name].read_text(encoding="utf-8")))
    assert not found, f"{name} defines scripted answers ({', '.join(found)}): they belong in mas/scripted/"


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a name that is no module is its nearest enclosing one)."""
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for m in imports(path):
            while m and m not in MODULES:
                m = m.rpartition(".")[0]
            if m and m != name:
                targets.add(m)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: each group of two or more modules that reach one another (Tarjan's strongly connected
    components, iteratively), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, targets = work[-1]
            nxt = next(targets, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = stack[stack.index(node):]
                    del stack[stack.index(node):]
                    if len(group) > 1:
                        found.append(sorted(group))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
    return sorted(found)


def test_the_cycle_count_sees_a_cycle_through_a_package_face():
    graph = {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg"}, "pkg.c": {"pkg.a"}, "other": set()}
    assert cycles(graph) == [["pkg", "pkg.a", "pkg.b"]]
    tree = ast.parse("from benchmark.workbench import toolkit")
    assert _names(tree.body[0]) == {"benchmark.workbench", "benchmark.workbench.toolkit"}


def test_no_import_cycles():
    found = cycles(import_graph())
    assert len(found) == 0, f"{len(found)} import cycle(s): {found[:5]}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_its_siblings_not_its_package_face(name):
    """``from pkg import x`` inside ``pkg`` runs ``pkg/__init__.py`` from within its own package: a cycle as soon
    as the face imports (or lazily exports) the module doing it."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    loaded = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    loaded |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    faces = sorted(m for m in loaded if name.startswith(m + "."))
    assert not faces, f"{name} imports its own package's face {faces}: import the sibling module instead"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_only_public_names_of_another(name):
    """A name with a leading underscore belongs to its module: a sibling that needs it gets a public name."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    bad = sorted(f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 and n.module.split(".")[0] in PACKAGES for a in n.names
                 if a.name.startswith("_") and not a.name.startswith("__"))
    if name in PRIVATE_IMPORTS:
        pytest.xfail(PRIVATE_IMPORTS[name])
    assert not bad, f"{name} imports private names {bad}"


ARCHITECTURE = ROOT / "docs" / "architecture.md"


def diagram(text: str) -> list[tuple[str, list[str]]]:
    """The stages of the layer diagram (the page's first ``text`` block), top to bottom, each with the
    subpackages its line lists (``methods/chief/`` as ``methods/chief``)."""
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    stages = []
    for line in block.splitlines():
        first, *rest = line.split() or [""]
        if first in PACKAGES:
            stages.append((first, [w.rstrip("/") for w in rest]))
    return stages


def subpackages(stage: str) -> list[str]:
    """The subpackages of ``stage`` on disk (every folder below it holding an ``__init__.py``), as paths."""
    return sorted(str(p.parent.relative_to(ROOT / stage)) for p in (ROOT / stage).rglob("__init__.py")
                  if p.parent != ROOT / stage and "__pycache__" not in p.parts)


def test_the_diagram_reader_sees_stages_and_their_subpackages():
    text = "# x\n```text\nmas   llm/  sweep/\n  |  v\ndescriptor    report/\n```\n```text\nbenchmark a/\n```"
    assert diagram(text) == [("mas", ["llm", "sweep"]), ("descriptor", ["report"])]


def test_the_layer_diagram_in_the_docs_matches_the_code():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    stages = diagram(text)
    order = [name for name, _ in stages]
    # bottom up, each stage may import itself and exactly the stages below it
    assert sorted(order) == sorted(PACKAGES), f"the diagram's stages {order} are not the packages {PACKAGES}"
    below = list(reversed(order))
    assert {s: set(below[: below.index(s) + 1]) for s in order} == ALLOWED, "stage order differs from ALLOWED"
    for stage, listed in stages:
        assert listed == sorted(listed) and listed == subpackages(stage), (stage, listed, subpackages(stage))
        section = re.split(rf"\n### {stage}(?=[ \n])", text, maxsplit=1)[1].split("\n### ", 1)[0]
        missing = [sub for sub in listed if f"- `{sub}/`:" not in section]
        assert not missing, f"docs/architecture.md does not say what {stage}'s {missing} hold"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name):
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    if name in OVERSIZED:
        pytest.xfail(OVERSIZED[name])
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines (at most {MAX_LINES})"


def test_mas_top_level_holds_few_modules():
    top = [p for p in (ROOT / "mas").glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= MAX_MAS_TOP_LEVEL, sorted(p.name for p in top)
