"""A run's environment in the runtime: action logs in graph state, environments rebuilt by replay.

Benchmarks whose tasks are solved by acting (WorkBench) give each run an
:class:`~benchmark.environment.Environment`. Its state must survive LangGraph
checkpoints, because a rollback resumes from any of them: so graph state
never holds an environment object. It holds each *branch*'s action log
(``envs``: branch name -> ``[{"name", "args", "ok"}, ...]``, plain JSON), and
a node that needs an environment rebuilds it by replaying its branch's log
on a fresh copy (:func:`replay`; a fresh WorkBench sandbox is ~2 ms, a call
far less). A resumed run therefore sees exactly the environment its
checkpoint had. A replay whose results differ from the log (a tool that is
not deterministic) is an infrastructure error, not a task result.

Branches: :data:`MAIN` is the run's own environment (the SAS acts on it; the
orchestrator's aggregator composes on it). Agents working in parallel act on
their own branch, named after the agent and forked from a base branch when
they first act. Which branch is the run's outcome is each topology's rule
(``state["outcome"]``; see ``benchmark/README.md``, "Side effects in
multi-agent systems").

>>> from benchmark.registry import get_benchmark
>>> from mas.config import ExperimentConfig
>>> bench = get_benchmark("workbench")
>>> task = bench.load_tasks(1)[0]
>>> new = lambda: bench.make_environment(task)
>>> env = replay(new, [{"name": "calendar.delete_event", "args": {"event_id": "00000256"}, "ok": True}])
>>> changes_text(env)
'calendar.delete_event(event_id="00000256")'
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Sequence
from typing import Any

from benchmark.environment import ActionRecord, Environment

MAIN = "main"
"""The run's own environment (the branch the SAS acts on, and the orchestrator's aggregator composes on)."""

ActionLog = list[dict[str, Any]]
EnvironmentFactory = Callable[[], Environment]


def merge_logs(a: dict[str, ActionLog] | None, b: dict[str, ActionLog] | None) -> dict[str, ActionLog]:
    """Reducer of ``envs``: a branch's new log replaces its old one (parallel branches write their own)."""
    return {**(a or {}), **(b or {})}


def log_of(env: Environment) -> ActionLog:
    """The environment's action log as graph state keeps it (outputs are in the trace, not here)."""
    return [{"name": a.name, "args": dict(a.args), "ok": a.ok} for a in env.actions]


def replay(new_environment: EnvironmentFactory, log: Sequence[dict[str, Any]]) -> Environment:
    """A fresh environment with ``log``'s calls made again, in order; ``RuntimeError`` when a result differs."""
    env = new_environment()
    for i, action in enumerate(log):
        result = env.call(action["name"], action["args"])
        if result.ok != action["ok"]:
            raise RuntimeError(f"environment replay diverged at call {i} ({action['name']}): logged ok={action['ok']}, "
                               f"replayed ok={result.ok} ({result.output[:200]})")
    return env


def branch_environment(new_environment: EnvironmentFactory | None, envs: dict[str, ActionLog] | None, branch: str,
                       base: str = MAIN) -> Environment | None:
    """Branch ``branch`` rebuilt from its log, or forked from ``base`` when it has none yet; None without environments."""
    if new_environment is None:
        return None
    envs = envs or {}
    return replay(new_environment, envs[branch] if branch in envs else envs.get(base, []))


def log_update(branch: str, env: Environment | None) -> dict[str, Any]:
    """The graph-state update recording ``env`` as ``branch`` (nothing when the run has no environment)."""
    return {} if env is None else {"envs": {branch: log_of(env)}}


def render_action(name: str, args: dict[str, Any]) -> str:
    """One call as text: ``calendar.delete_event(event_id="00000256")`` (values JSON-quoted)."""
    return f"{name}({', '.join(f'{k}={json.dumps(v, ensure_ascii=False)}' for k, v in args.items())})"


def parse_actions(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The calls in ``text`` written as :func:`render_action` writes them (``; ``-separated), in order.

    >>> parse_actions('a.b(x="1"); c.d()')
    [('a.b', {'x': '1'}), ('c.d', {})]
    """
    out = []
    for part in text.split("; "):
        try:
            node = ast.parse(part.strip(), mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Call) and not node.args and all(
                k.arg and isinstance(k.value, ast.Constant) for k in node.keywords):
            out.append((ast.unparse(node.func), {k.arg: k.value.value for k in node.keywords}))  # type: ignore[attr-defined]
    return out


def state_changes(env: Environment, since: int = 0) -> list[ActionRecord]:
    """The accepted calls (from action ``since`` on) of tools that change the state: what the branch did."""
    return [a for a in env.actions[since:] if a.ok and env.changes_state(a.name)]


def changes_text(env: Environment, since: int = 0) -> str:
    """:func:`state_changes` rendered, ``; ``-separated; ``none`` when there are none."""
    return "; ".join(render_action(a.name, a.args) for a in state_changes(env, since)) or "none"


def outcome_environment(new_environment: EnvironmentFactory | None, state: dict[str, Any]) -> Environment | None:
    """The environment the finished graph names as the run's outcome (``state["outcome"]``, default :data:`MAIN`)."""
    if new_environment is None:
        return None
    return replay(new_environment, (state.get("envs") or {}).get(state.get("outcome") or MAIN, []))
