"""CHIEF's candidate sets per level in the project variant: subtasks, then agents inside a subtask, then their steps.

CHIEF (section 4.2.2) backtracks top-down through the hierarchy under the
oracles' guidance; Appendix E does it in one call (the paper variant,
:mod:`attribution.methods.chief.paper`). ``chief(variant="project")`` searches instead: each
level yields a ranked candidate set, and the search
(:func:`attribution.methods.chief.locate`) backtracks to the next candidate
of a level when every candidate below it was rejected:

- subtasks (:func:`candidate_subtasks`): every failed subtask reachable
  back from the last failed one along failed parents, the origin that
  :func:`backtrack` reaches first, then the others, earliest first;
- agents (:func:`pick_agent`, one call): the model's choice, its
  alternatives, then the subtask's other actors;
- steps (:func:`pick_steps`, one call): the model's choice, its
  alternatives, then the agent's other steps in the subtask.

LEVEL_WIDTH candidates of each level are tried at most (a cost guard).
"""

from __future__ import annotations

from typing import Any

from attribution.llm.calls import CaseLedger
from attribution.llm.prompting import messages, render_steps, resolve_agent, resolve_step, step_views, steps_of
from attribution.llm.replies import contract, many, one_of, schema_of, text
from attribution.methods.chief.graph import CausalGraph, Subtask, actors
from attribution.methods.chief.model_graph import SYSTEM
from attribution.sources.trajectory import Trajectory, normalize_agent

LEVEL_WIDTH = 2
"""Candidates tried per level (subtasks, agents per subtask, steps per agent) before the search gives up."""


def _log(traj: Trajectory, indices: range | list[int], budget: int, focus: set[int] | None = None) -> tuple[str, Any]:
    return render_steps(step_views(traj, list(indices), focus=focus), budget, focus=focus)


def backtrack(subtasks: list[Subtask], verdicts: list[dict[str, Any]], graph: CausalGraph) -> tuple[Subtask, list[int]]:
    """The origin subtask and the walk to it: from the last subtask that failed its oracle, back along the
    graph's subtask edges to a failed parent, the latest first, until no parent failed (the last subtask
    when none admits failure).

    >>> subs = [Subtask(index=i, name="s", start=i, end=i) for i in range(3)]
    >>> g = CausalGraph(subtasks=subs, otar={}, edges=[{"level": "subtask", "src": 0, "dst": 1, "type": "sequential"},
    ...                                               {"level": "subtask", "src": 1, "dst": 2, "type": "sequential"}])
    >>> sat = lambda *v: [{"subtask": i, "satisfied": x} for i, x in enumerate(v)]
    >>> [(o.index, path) for o, path in [backtrack(subs, sat(False, True, False), g), backtrack(subs, sat(True, False, False), g)]]
    [(2, [2]), (1, [2, 1])]
    """
    failed = {v["subtask"] for v in verdicts if v["satisfied"] is False}
    start = next((sub for sub in reversed(subtasks) if sub.index in failed), None)
    if start is None:
        return subtasks[-1], []
    cur, path = start, [start.index]
    while True:
        parent = next((p for p in reversed(graph.subtask_parents(cur.index)) if p in failed and p not in path), None)
        if parent is None:
            return cur, path
        cur = subtasks[parent]
        path.append(parent)


def candidate_subtasks(subtasks: list[Subtask], verdicts: list[dict[str, Any]], graph: CausalGraph) -> list[int]:
    """The subtask level's candidate set: :func:`backtrack`'s origin first, then every other failed subtask
    reachable back from the last failed one along failed parents, earliest first.

    >>> subs = [Subtask(index=i, name="s", start=i, end=i) for i in range(4)]
    >>> g = CausalGraph(subtasks=subs, otar={}, edges=[{"level": "subtask", "src": a, "dst": b, "type": "sequential"}
    ...                                                for a, b in [(0, 1), (1, 2), (2, 3)]])
    >>> candidate_subtasks(subs, [{"subtask": i, "satisfied": x} for i, x in enumerate([True, False, False, False])], g)
    [1, 2, 3]
    """
    origin, path = backtrack(subtasks, verdicts, graph)
    if not path:
        return [origin.index]
    failed = {v["subtask"] for v in verdicts if v["satisfied"] is False}
    reached, stack = {path[0]}, [path[0]]
    while stack:
        for parent in graph.subtask_parents(stack.pop()):
            if parent in failed and parent not in reached:
                reached.add(parent)
                stack.append(parent)
    return [origin.index, *sorted(reached - {origin.index})]


async def pick_agent(ledger: CaseLedger, traj: Trajectory, header: str, graph: CausalGraph, sub: Subtask,
                     verdict: dict[str, Any]) -> tuple[list[str], str]:
    """The agent level's candidate set inside ``sub`` (the model's choice, its alternatives, the other actors),
    and how the first was chosen."""
    names = actors(traj, sub)
    if len(names) == 1:
        return names, "only_agent"
    tuples = "\n".join(
        f"- {name}: " + "; ".join(f"{k}: {v}" for k, v in graph.otar.get((sub.index, normalize_agent(name)), {}).items())
        for name in names
    )
    ask = (
        f"This subtask failed. Goal: {verdict.get('goal') or sub.name}. Acceptance: {verdict.get('acceptance') or 'n/a'}.\n"
        f"Which of these agents caused the failure: {', '.join(names)}? Name the most likely one, and the next "
        "likely ones as alternatives. Reply with JSON only:\n"
        '{"reason": "<one sentence>", "agent": "<name>", "alternatives": ["<name>"]}'
    )

    def build(budget: int):
        log, report = _log(traj, sub.steps, budget - 350 - len(tuples) // 4)
        user = f"{header}\n\nAgents' observation/thought/action/result:\n{tuples}\n\nSteps:\n{log}\n\n{ask}"
        return messages(SYSTEM, user), report

    schema = schema_of(contract("AgentReply", reason=text(), agent=one_of(names), alternatives=many(one_of(names), 2)))
    reply = await ledger.ask("agent", build, hints={"attr_range": [sub.start, sub.end]}, schema=schema)
    obj = ledger.parse("agent", reply) or {}
    alts = obj.get("alternatives") if isinstance(obj.get("alternatives"), list) else []
    picked = [a for a in (resolve_agent(traj, v) for v in [obj.get("agent"), *alts]) if a in names]
    if picked and picked[0] == resolve_agent(traj, obj.get("agent")):
        return list(dict.fromkeys(picked + names)), "model"
    ledger.note_fallback("agent", "first_actor")
    return list(dict.fromkeys(picked + names)) if picked else names, "first_actor"


async def pick_steps(ledger: CaseLedger, traj: Trajectory, header: str, sub: Subtask, agent: str) -> list[int]:
    """The step level's candidate set: steps of ``agent`` in ``sub``, the model's choice first, then its
    alternatives, then the rest."""
    own = steps_of(traj, agent, sub.steps)
    if len(own) <= 1:
        return own or [sub.start]
    ask = (
        f"Which step of {agent} (steps {', '.join(map(str, own))}) is the decisive error? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "step": <step number>, "alternatives": [<step number>]}'
    )

    def build(budget: int):
        log, report = _log(traj, sub.steps, budget - 250, focus=set(own))
        return messages(SYSTEM, f"{header}\n\nSteps:\n{log}\n\n{ask}"), report

    schema = schema_of(contract("StepReply", reason=text(), step=one_of(own), alternatives=many(one_of(own), 2)))
    reply = await ledger.ask("step", build, hints={"attr_candidates": own}, schema=schema)
    obj = ledger.parse("step", reply) or {}
    alts = obj.get("alternatives") if isinstance(obj.get("alternatives"), list) else []
    picked = [s for s in (resolve_step(traj, v) for v in [obj.get("step"), *alts]) if s is not None]
    if not picked:
        ledger.note_fallback("step", "agent_steps_in_order")
    return list(dict.fromkeys([s for s in picked if s in own] + own))
