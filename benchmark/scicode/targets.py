"""SciCode's expected values (``target``): computed from the ground truth for dev problems, read from
``test_data.h5`` for test problems.

Upstream's test cases end in asserts such as ``assert np.allclose(f(x), target)`` with ``target`` read from
``test_data.h5``. For a development problem the target is the value the ground truth gives for the expression
compared with ``target``, so it is computed offline: each assert that mentions ``target`` becomes a capture of
the expression beside it (``f(x)``; ``target[k]`` beside ``g(x)[k]`` captures a tuple), and the sub-step's
ground-truth program runs with the rewritten test cases in the code sandbox (:mod:`benchmark.sandbox`), once.

The values are cached per user (``$MAS_CACHE_DIR`` or ``$XDG_CACHE_HOME/mas-econ``, ``~/.cache``, in
``scicode/``), not shipped: they total tens of MB of arrays (filtered images of 800x800 pixels) and depend on the
installed numpy and scipy, which are part of the cache key. Values are kept in the plain-data encoding of
:mod:`benchmark.sandbox.remote_child` (never pickled), so reading a cache file executes nothing.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import os
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import benchmark.sandbox.remote_child as remote_child
from benchmark.sandbox import capture_value
from benchmark.scicode.data import Problem, Step
from benchmark.scicode.prompts import previous_code
from descriptor.errors import UserError

CAPTURE_VERSION = "1"
"""Bumped when the rewriting of test cases changes (part of the cache key)."""
COMPUTE_TIMEOUT_S = 3600.0
"""Time for one sub-step's ground truth over all its test cases (s); problems 47 and 51 (Monte Carlo, molecular
dynamics) take 2-5 min on an idle core, several times that on a loaded machine."""
COMPUTE_MEMORY_MB = 4096
_SCICODE_IMPORT_RE = re.compile(r"^\s*(from\s+scicode\S*\s+import\s+.*|import\s+scicode\S*.*)$", re.MULTILINE)


def clean_test_case(code: str) -> str:
    """A test case without its imports of upstream's ``scicode`` package (the judge defines those helpers)."""
    return _SCICODE_IMPORT_RE.sub("", code)


def _target_part(node: ast.expr) -> tuple[bool, int | None]:
    """(is it ``target`` or ``target[k]``, k)."""
    if isinstance(node, ast.Name) and node.id == "target":
        return True, None
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "target"
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
        return True, node.slice.value
    return False, None


def _captured(test: ast.expr) -> ast.expr | None:
    """The expression ``target`` stands for in an assert's test (a tuple for ``target[k]`` parts), or None."""
    parts: dict[int | None, ast.expr] = {}
    for node in ast.walk(test):
        operands = node.args if isinstance(node, ast.Call) else \
            [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
        marks = [_target_part(o) for o in operands]
        if sum(is_t for is_t, _ in marks) != 1 or len(operands) < 2:
            continue
        key = next(k for is_t, k in marks if is_t)
        parts.setdefault(key, next(o for o, (is_t, _) in zip(operands, marks) if not is_t))
    if None in parts:
        return parts[None]
    if parts and sorted(parts) == list(range(len(parts))):
        return ast.Tuple(elts=[parts[k] for k in range(len(parts))], ctx=ast.Load())
    return None


class _Capture(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        value = _captured(node.test)
        if value is None:
            return node
        call = ast.Call(func=ast.Name(id="__capture__", ctx=ast.Load()), args=[value], keywords=[])
        return ast.copy_location(ast.Expr(value=call), node)


def names_target(test_case: str) -> bool:
    """Whether ``test_case`` reads ``target`` at all (upstream's expected value from ``test_data.h5``).

    >>> names_target("assert np.allclose(f(1), target)"), names_target("assert not np.isnan(f(1)).any()")
    (True, False)
    """
    return any(isinstance(n, ast.Name) and n.id == "target" for n in ast.walk(ast.parse(clean_test_case(test_case))))


def compares_no_target(step: Step) -> bool:
    """Whether none of ``step``'s test cases compares a target: its tests check properties or a closed form of
    their own (78.1, 78.2), so a pass does not say the answer reproduces the ground truth's values."""
    return not any(names_target(case) for case in step.test_cases)


def capture_source(test_case: str) -> str:
    """``test_case`` with each assert on ``target`` replaced by ``__capture__(<the expression compared>)``.

    A test case whose asserts never mention ``target`` (problem 78's) is kept as it is; its target is None.

    >>> capture_source("x = 2\\nassert np.allclose(f(x), target)")
    'x = 2\\n__capture__(f(x))'
    >>> capture_source("assert np.allclose(g(a)[0], target[0]) and np.allclose(g(a)[1], target[1])")
    '__capture__((g(a)[0], g(a)[1]))'
    """
    tree = ast.parse(clean_test_case(test_case))
    rewriter = _Capture()
    return ast.unparse(ast.fix_missing_locations(rewriter.visit(tree)))


def step_program(problem: Problem, step: Step, code: str) -> str:
    """What upstream runs for a sub-step: the dependencies, the previous sub-steps' code, then ``code``."""
    previous = "\n".join(previous_code(s) for s in problem.steps[:step.index - 1])
    return f"{problem.dependencies}\n{previous}\n{code}\n"


def _capture_script(problem: Problem, step: Step, helpers: str) -> str:
    cases = [capture_source(c) for c in step.test_cases]
    lines = [step_program(problem, step, step.ground_truth or ""), helpers,
             "__targets__ = []", "def __capture__(value):", "    __seen__.append(value)"]
    for case in cases:
        lines += ["__seen__ = []", case, "__targets__.append(__seen__[0] if __seen__ else None)"]
    return "\n".join(lines) + "\n"


def cache_dir() -> Path:
    """Where computed targets are kept: ``$MAS_CACHE_DIR`` or ``$XDG_CACHE_HOME/mas-econ`` (``~/.cache``), then
    ``scicode`` (the rule of :func:`mas.serving.catalogue.cache_root`, a stage above this one)."""
    root = os.environ.get("MAS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"), "mas-econ")
    return Path(root).expanduser() / "scicode"


def _key(problem: Problem, step: Step, helpers: str) -> str:
    versions = "|".join(f"{p}={metadata.version(p)}" for p in ("numpy", "scipy"))
    text = "\x00".join([CAPTURE_VERSION, versions, _capture_script(problem, step, helpers)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def computed_targets(problem: Problem, step: Step, helpers: str, *, isolation: str) -> list[Any]:
    """The targets of ``step``'s test cases from its ground truth: from the cache, else computed in the sandbox.

    ``helpers``: the comparison functions the test cases may call (also run in the judge).
    Raises :class:`UserError` when the ground truth fails (the message carries its error).
    """
    if step.ground_truth is None:
        raise UserError(f"SciCode sub-step {step.step_id} has no ground truth: its targets come from test_data.h5 "
                        "(benchmarks.scicode.targets)")
    path = cache_dir() / f"{step.step_id}-{_key(problem, step, helpers)}.txt.gz"
    if path.is_file():
        try:
            return list(remote_child.decode(ast.literal_eval(gzip.decompress(path.read_bytes()).decode("utf-8"))))
        except (OSError, ValueError, SyntaxError, EOFError, remote_child.NotPlainData):
            pass  # a damaged cache file is recomputed
    tree, error = capture_value(_capture_script(problem, step, helpers), "__targets__",
                                timeout_s=COMPUTE_TIMEOUT_S, memory_mb=COMPUTE_MEMORY_MB, isolation=isolation)
    if tree is None:
        raise UserError(f"SciCode sub-step {step.step_id}: the ground truth failed on its test cases:\n{error}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(gzip.compress(repr(tree).encode("utf-8"), compresslevel=3))
    os.replace(tmp, path)  # atomic: a concurrent run reads the old file or the whole new one
    return list(remote_child.decode(tree))


def h5_targets(path: str, step: Step) -> list[Any]:
    """``step``'s targets from upstream's ``test_data.h5`` (its layout: ``<step>/test<i>/var<j>``)."""
    try:
        import h5py
    except ImportError:
        raise UserError("benchmarks.scicode.targets needs h5py: pip install 'mas-econ[scicode]'") from None
    try:
        with h5py.File(Path(path).expanduser(), "r") as f:
            return [_h5_case(f, f"{step.step_id}/test{i + 1}") for i in range(len(step.test_cases))]
    except (OSError, KeyError) as err:
        raise UserError(f"benchmarks.scicode.targets: {path}: no targets for sub-step {step.step_id} ({err})") from None


def _h5_value(obj: Any) -> Any:
    import h5py

    if isinstance(obj, h5py.Dataset):
        value = obj[()]
        return value.decode("utf-8") if isinstance(value, bytes) else value
    keys = list(obj.keys())
    if keys == ["list"]:
        return [_h5_value(obj["list"][k]) for k in obj["list"].keys()]
    if "sparse_matrix" in keys:
        raise UserError(f"{obj.name}: sparse-matrix targets are not supported (they cannot cross to the judge)")
    out: dict[Any, Any] = {}
    for key in keys:
        try:
            out[float(key)] = _h5_value(obj[key])
        except ValueError:
            out[key] = _h5_value(obj[key])
    return out


def _h5_case(f: Any, group_path: str) -> Any:
    group = f[group_path]
    keys = list(group.keys())
    values = [_h5_value(group[k]) for k in keys]
    return values[0] if len(values) == 1 else tuple(values)
