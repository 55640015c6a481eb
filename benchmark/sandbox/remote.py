"""Code benchmarks' tests with an unforgeable verdict: the tests and the candidate in two separate sandboxes.

Running the candidate's program and the tests in one process lets the program
forge the verdict: print the end marker it finds among its own constants,
return an object whose ``__eq__`` is always true, patch ``builtins``, exit
early or from an ``atexit`` hook. Here the candidate's program runs in one
sandbox (:mod:`benchmark.sandbox.process`) as a server of remote function calls, and
the tests run in another, the *judge*, with every name of the candidate
replaced by a proxy (:class:`benchmark.sandbox.remote_child.Ref`): a call ships its
arguments as plain data over a pipe, and the reply comes back as plain data,
parsed with :func:`ast.literal_eval` and rebuilt as builtin values or numpy
arrays (never an object of the candidate's). Every assertion and comparison
runs in the judge, whose verdict goes to a file only the parent holds. The
candidate cannot reach the judge's process, memory or verdict (separate PID,
mount and user namespaces), and the benchmark data is not in its view
(:mod:`benchmark.sandbox.view`), so the only way to pass is to return the
right values.

What cannot be expressed this way, and how it is handled:

- Tests that observe the candidate's side effects (an argument mutated in
  place, printed output, files written): the candidate works on copies of the
  arguments, so such a test sees no change and fails. None of HumanEval's 164
  or MBPP's 500 tests does this (every reference solution passes).
- Values that are not plain data (an instance of the candidate's class, a
  function, a generator): the call raises :class:`NotPlainData` in the tests,
  so a test comparing them fails. Fixtures that build such objects (MBPP's
  ``test_setup_code``) run on the candidate's side (``candidate_setup``); the
  tests pass them back by name, as arguments, without seeing them.
- Exceptions raised by the candidate arrive as the builtin exception of that
  name (``ValueError``, ...), else as :class:`RemoteError`, with the message.

>>> run_remote_tests("def add(a, b):\\n    return a + b\\n",
...                  RemoteTests(tests="assert add(2, 3) == 5"), timeout_s=10, memory_mb=512).passed
True
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchmark.sandbox.remote_child as remote_child
from benchmark.sandbox.process import Prepared, SandboxResult, finish, kill_tree, memfd, prepare, wait_for_exit

_CHILD_SOURCE = (Path(__file__).parent / "remote_child.py").read_text(encoding="utf-8")
_CANDIDATE_GRACE_S = 1.0
"""How long the candidate may take to exit once the tests are over before it is killed (s)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class RemoteTests:
    """Tests to run against a candidate program, in the trusted judge."""

    tests: str
    """Test code (asserts, ``check(candidate)``), run in the judge after ``trusted_setup``."""
    trusted_setup: str = ""
    """Code the tests rely on that is benchmark data (HumanEval's prompt with its helpers), run in the judge."""
    candidate_setup: str = ""
    """Fixtures run after the program on the candidate's side (they may use its classes); the tests see them by name."""
    remote: tuple[str, ...] = ()
    """Names bound to the candidate's side even if ``trusted_setup`` defines them (the entry point's stub)."""
    values: dict[str, Any] = field(default_factory=dict)
    """Plain data bound by name in the judge before ``trusted_setup`` (SciCode's expected values): it reaches the
    judge through a file of its own, as the wire encodes it, never through the candidate."""


@dataclass(kw_only=True, frozen=True, slots=True)
class RemoteOutcome:
    """What running the tests against a candidate gave."""

    passed: bool
    """The tests ran to their end in the judge without an exception."""
    error: str | None
    """The judge's traceback when a test failed (the assertion, or the candidate's error as raised there)."""
    calls: int
    """Calls made to the candidate."""
    timed_out: bool
    limit: str | None
    """The limit that ended the candidate or the judge, if one did: timeout, memory, cpu, file_size."""
    duration_ms: float
    """Wall-clock time from spawning both processes to reaping them, in ms."""
    candidate_stderr: str
    isolation: str

    def details(self) -> dict[str, Any]:
        """The fields run records keep (stderr tail: the failing test's traceback, then the candidate's stderr)."""
        tail = "\n".join(part for part in (self.error or "", self.candidate_stderr.strip()) if part)
        return {"passed": self.passed, "calls": self.calls, "timed_out": self.timed_out, "limit": self.limit,
                "duration_ms": round(self.duration_ms, 1), "stderr_tail": tail[-1500:],
                "isolation": self.isolation}


def _names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names read, names bound) anywhere in ``tree``."""
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded, bound


def split_names(tests: RemoteTests) -> tuple[list[str], list[str]]:
    """(the candidate's names, standard modules to import in the judge): the names the tests read but never bind.

    A free name of a standard-library module used only for its attributes (``math`` in MBPP's ``math.isclose``
    asserts, which relied on the candidate's own ``import math``) is imported in the judge; any other is the
    candidate's.

    >>> split_names(RemoteTests(tests="assert math.isclose(area(2), 12.56, rel_tol=0.001)"))
    (['area'], ['math'])
    """
    try:
        tree = ast.parse(tests.tests)
        _, setup_bound = _names(ast.parse(tests.trusted_setup))
    except SyntaxError:  # the judge reports it as the tests' failure
        return list(tests.remote), []
    loaded, bound = _names(tree)
    free = sorted(loaded - bound - setup_bound - set(dir(builtins)) - set(tests.remote) - set(tests.values))
    # A module is only ever used for its attributes (math.isclose); a name called or passed is the candidate's.
    as_base = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    other = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in as_base}
    modules = [n for n in free if n in sys.stdlib_module_names and n not in other]
    return [*tests.remote, *(n for n in free if n not in modules)], modules


def run_remote_tests(program: str, tests: RemoteTests, *, timeout_s: float, memory_mb: int,
                     isolation: str = "namespaces") -> RemoteOutcome:
    """Run ``program`` as the candidate and ``tests`` in the judge, each sandboxed with these limits (s, MB)."""
    remote, imports = split_names(tests)
    spec = {"tests": tests.tests, "trusted_setup": tests.trusted_setup, "remote": remote, "imports": imports}
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    verdict_fd = memfd("verdict")
    pipes = [request_r, request_w, reply_r, reply_w]
    preps: list[Prepared] = []
    values_fd = memfd("values", repr(remote_child.encode(tests.values)).encode("utf-8"))
    spec["values_fd"] = values_fd
    try:
        preps.append(prepare(f"{_CHILD_SOURCE}\nserve({program!r}, {tests.candidate_setup!r}, {request_r}, "
                             f"{reply_w})\n", timeout_s, memory_mb, None, isolation, (request_r, reply_w)))
        preps.append(prepare(f"{_CHILD_SOURCE}\njudge({spec!r}, {request_w}, {reply_r}, {verdict_fd})\n",
                             timeout_s, memory_mb, None, isolation, (request_w, reply_r, verdict_fd, values_fd)))
        candidate, judge, timed_out, start = _run_pair(preps[0], preps[1], pipes, timeout_s)
        cand_res = finish(preps[0], candidate.returncode, timed_out, start, timeout_s, memory_mb,
                          ended_by_parent=candidate.returncode == -9 and not timed_out)
        judge_res = finish(preps[1], judge.returncode, timed_out, start, timeout_s, memory_mb)
        verdict = _verdict(verdict_fd)
    finally:
        for prep in preps:
            prep.release()
        for fd in [*pipes, verdict_fd, values_fd]:
            try:
                os.close(fd)
            except OSError:
                pass
    return _outcome(verdict, judge_res, cand_res)


def _run_pair(candidate: Prepared, judge: Prepared, pipes: list[int],
              timeout_s: float) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], bool, float]:
    """Spawn both, wait for the judge (within the timeout), then for the candidate briefly; kill what is left."""
    procs: list[subprocess.Popen[bytes]] = []
    start = time.perf_counter()
    timed_out = False
    try:
        for prep in (candidate, judge):
            procs.append(subprocess.Popen(prep.argv, **prep.spawn_kwargs()))  # type: ignore[call-overload]
            prep.after_spawn()
        for fd in pipes:  # only the children hold the pipes now: a side that ends is seen by the other
            os.close(fd)
        pipes.clear()
        try:
            wait_for_exit(procs[1], timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        left = timeout_s - (time.perf_counter() - start)
        try:
            wait_for_exit(procs[0], max(0.0, min(left, _CANDIDATE_GRACE_S)) if not timed_out else 0.0)
        except subprocess.TimeoutExpired:
            pass
    finally:
        for proc in procs:
            if proc.returncode is None and proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
    return procs[0], procs[1], timed_out, start


def _verdict(fd: int) -> dict[str, Any]:
    size = os.fstat(fd).st_size
    try:
        verdict = json.loads(os.pread(fd, min(size, 1 << 20), 0) or b"{}")
    except ValueError:
        verdict = {}
    return verdict if isinstance(verdict, dict) else {}


def _outcome(verdict: dict[str, Any], judge: SandboxResult, candidate: SandboxResult) -> RemoteOutcome:
    passed = verdict.get("passed") is True and judge.ok
    error = verdict.get("error") or (None if passed else judge.stderr.strip()[-1500:] or "the tests did not finish")
    return RemoteOutcome(passed=passed, error=error, calls=int(verdict.get("calls") or 0),
                         timed_out=judge.timed_out, limit=judge.limit or candidate.limit,
                         duration_ms=max(judge.duration_ms, candidate.duration_ms),
                         candidate_stderr=candidate.stderr[-1500:], isolation=judge.isolation)


def capture_value(program: str, name: str, *, timeout_s: float, memory_mb: int,
                  isolation: str = "namespaces") -> tuple[Any, str]:
    """(the encoded value of ``program``'s variable ``name``, ""), or (None, the error): trusted code in a sandbox.

    For values computed from benchmark data (SciCode's targets from its ground truth): the program runs
    sandboxed like any code, and its value comes back over a pipe as the wire's literal tree (rebuild it with
    :func:`benchmark.sandbox.remote_child.decode`). A pipe, not a file: the sandbox limits files to 32 MiB, and
    SciCode's largest targets are about 100 MB encoded.
    """
    read_fd, write_fd = os.pipe()
    chunks: list[bytes] = []

    def drain() -> None:
        while chunk := os.read(read_fd, 1 << 20):
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    code = (f"{_CHILD_SOURCE}\n{program}\n__out__ = repr(encode({name})).encode('utf-8')\n"
            f"while __out__:\n    __out__ = __out__[os.write({write_fd}, __out__):]\nos.close({write_fd})\n")
    try:
        prep = prepare(code, timeout_s, memory_mb, None, isolation, (write_fd,))
        reader.start()
        start = time.perf_counter()
        timed_out = False
        proc = subprocess.Popen(prep.argv, **prep.spawn_kwargs())  # type: ignore[call-overload]
        prep.after_spawn()
        os.close(write_fd)
        write_fd = -1
        try:
            wait_for_exit(proc, timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
        result = finish(prep, proc.returncode, timed_out, start, timeout_s, memory_mb)
        reader.join()
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
    if not result.ok:
        return None, result.stderr.strip()[-2000:] or f"exit status {result.exit_code}"
    try:
        return ast.literal_eval(b"".join(chunks).decode("utf-8")), ""
    except (ValueError, SyntaxError, UnicodeDecodeError) as err:
        return None, f"the value of {name} did not come back as plain data ({err})"
