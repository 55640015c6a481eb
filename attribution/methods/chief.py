"""CHIEF: hierarchical causal graph, virtual oracles, top-down backtracking, counterfactual screening.

Pipeline per case (model calls in brackets):

1. [1] decompose the log into subtasks (one built-in exemplar as few-shot);
   the reply is repaired into contiguous ranges covering every step once.
2. [0] causal graph: OTAR tuples and typed edges (:mod:`._chief_graph`).
3. [≤ #subtasks] a virtual oracle per subtask, in order: goal,
   preconditions, key evidence, acceptance criteria, and whether the
   subtask met them; backtracking stops at the first failed subtask.
4. [≤ 1] the responsible agent within that subtask (skipped when only one
   agent acts there), [≤ 1] its candidate steps.
5. Counterfactual screening of the candidates, in order:
   deviation-aware pruning (an error the agent corrected itself later, with
   no error after the fix, is dropped while other candidates remain);
   planning-control (a step inside a loop is moved to the loop's first
   step); [≤ MAX_HOPS] local + data-flow counterfactual: "would fixing this
   step have made the subtask succeed, or was its input already wrong?",
   following data edges back to the first corrupted data.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from attribution.methods import _scripted  # noqa: F401  (scripted responders)
from attribution.methods._chief_graph import (
    CausalGraph,
    Subtask,
    actors,
    build_graph,
    fallback_subtasks,
    loop_start,
    pick_exemplar,
    repair_subtasks,
    self_corrected,
)
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.prompting import (
    LLMSession,
    case_header,
    clip,
    display_agent,
    finish,
    messages,
    new_session,
    render_steps,
    resolve_agent,
    resolve_step,
    s_enum,
    s_list,
    s_obj,
    s_step,
    s_text,
    step_views,
    steps_of,
    to_unit,
)
from attribution.trajectory import Trajectory, normalize_agent

MAX_HOPS = 2
"""Counterfactual calls per case (each may move the candidate back along a data edge)."""
SYSTEM = (
    "You analyse the log of a multi-agent team that failed its task, to find the decisive error: the earliest "
    "step whose mistake caused the failure. Be brief. Answer in JSON only."
)


def _yes(value: Any, text: str = "") -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        return value.strip().lower().startswith(("y", "true"))
    m = re.search(r"\b(yes|no)\b", text or "", re.I)
    return None if not m else m.group(1).lower() == "yes"


def _log(traj: Trajectory, indices: range | list[int], budget: int, focus: set[int] | None = None) -> tuple[str, Any]:
    return render_steps(step_views(traj, list(indices), focus=focus), budget, focus=focus)


# ------------------------------------------------------------------ stages


async def decompose(session: LLMSession, traj: Trajectory, header: str) -> tuple[list[Subtask], str]:
    """Subtasks from the model, repaired; equal chunks when the reply is unusable."""
    ex = pick_exemplar(traj)
    ask = (
        "Split the log into 2-6 subtasks of consecutive steps that together cover every step. Reply with JSON only:\n"
        '{"reason": "<one sentence>", "subtasks": [{"name": "<short>", "start": <first step>, "end": <last step>}]}'
    )

    def build(budget: int):
        text, report = _log(traj, range(traj.n_steps), budget - 350)
        user = f"Example log:\n{ex['log']}\nExample subtasks: {ex['subtasks']}\n\n{header}\n\nLog:\n{text}\n\n{ask}"
        return messages(SYSTEM, user), report

    span = s_obj(name=s_text(40), start=s_step(0, traj.n_steps - 1), end=s_step(0, traj.n_steps - 1))
    schema = s_obj(reason=s_text(), subtasks=s_list(span, 6, 1))
    reply = await session.ask("decompose", build, meta={"attr_n_steps": traj.n_steps}, schema=schema)
    obj = session.parse("decompose", reply) or {}
    subs = repair_subtasks(obj.get("subtasks"), traj.n_steps)
    if subs:
        return subs, "model"
    session.note_fallback("decompose", "equal_chunks")
    return fallback_subtasks(traj), "equal_chunks"


async def oracle(session: LLMSession, traj: Trajectory, header: str, graph: CausalGraph, sub: Subtask) -> dict[str, Any]:
    """The virtual oracle of ``sub`` and its verdict (``satisfied``: True/False/None)."""
    before = [s for s in graph.subtasks if s.index < sub.index]
    done = "; ".join(f"{s.name} (steps {s.start}-{s.end})" for s in before) or "none"
    ask = (
        f"Subtask '{sub.name}' = steps {sub.start}-{sub.end}. Earlier subtasks: {done}.\n"
        "State what this subtask had to achieve, then judge it. Reply with JSON only:\n"
        '{"goal": "<short>", "preconditions": "<short>", "key_evidence": "<short>", "acceptance": "<criteria>", '
        '"reason": "<one sentence>", "satisfied": "yes" or "no"}'
    )

    def build(budget: int):
        text, report = _log(traj, sub.steps, budget - 350)
        return messages(SYSTEM, f"{header}\n\nSteps of this subtask:\n{text}\n\n{ask}"), report

    schema = s_obj(**{k: s_text(80) for k in ("goal", "preconditions", "key_evidence", "acceptance")},
                   reason=s_text(), satisfied=s_enum(["yes", "no"]))
    reply = await session.ask("oracle", build, meta={"attr_range": [sub.start, sub.end]}, schema=schema)
    obj = session.parse("oracle", reply) or {}
    keys = ("goal", "preconditions", "key_evidence", "acceptance")
    out = {k: clip(str(obj.get(k, "")), 200) for k in keys}
    out["satisfied"] = _yes(obj.get("satisfied"), reply)
    return out


async def pick_agent(session: LLMSession, traj: Trajectory, header: str, graph: CausalGraph, sub: Subtask, verdict: dict[str, Any]) -> tuple[str, str]:
    """The responsible agent inside ``sub``, and how it was chosen."""
    names = actors(traj, sub)
    if len(names) == 1:
        return names[0], "only_agent"
    tuples = "\n".join(
        f"- {name}: " + "; ".join(f"{k}: {v}" for k, v in graph.otar.get((sub.index, normalize_agent(name)), {}).items())
        for name in names
    )
    ask = (
        f"This subtask failed. Goal: {verdict.get('goal') or sub.name}. Acceptance: {verdict.get('acceptance') or 'n/a'}.\n"
        f"Which of these agents caused the failure: {', '.join(names)}? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "agent": "<name>"}'
    )

    def build(budget: int):
        text, report = _log(traj, sub.steps, budget - 350 - len(tuples) // 4)
        user = f"{header}\n\nAgents' observation/thought/action/result:\n{tuples}\n\nSteps:\n{text}\n\n{ask}"
        return messages(SYSTEM, user), report

    schema = s_obj(reason=s_text(), agent=s_enum(names))
    reply = await session.ask("agent", build, meta={"attr_range": [sub.start, sub.end]}, schema=schema)
    obj = session.parse("agent", reply) or {}
    agent = resolve_agent(traj, obj.get("agent"))
    if agent in names:
        return agent, "model"
    session.note_fallback("agent", "first_actor")
    return names[0], "first_actor"


async def pick_steps(session: LLMSession, traj: Trajectory, header: str, sub: Subtask, agent: str) -> list[int]:
    """Candidate steps of ``agent`` in ``sub``, the model's choice first, then its alternatives, then the rest."""
    own = steps_of(traj, agent, sub.steps)
    if len(own) <= 1:
        return own or [sub.start]
    ask = (
        f"Which step of {agent} (steps {', '.join(map(str, own))}) is the decisive error? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "step": <step number>, "alternatives": [<step number>]}'
    )

    def build(budget: int):
        text, report = _log(traj, sub.steps, budget - 250, focus=set(own))
        return messages(SYSTEM, f"{header}\n\nSteps:\n{text}\n\n{ask}"), report

    schema = s_obj(reason=s_text(), step=s_enum(own), alternatives=s_list(s_enum(own), 2))
    reply = await session.ask("step", build, meta={"attr_candidates": own}, schema=schema)
    obj = session.parse("step", reply) or {}
    alts = obj.get("alternatives") if isinstance(obj.get("alternatives"), list) else []
    picked = [s for s in (resolve_step(traj, v) for v in [obj.get("step"), *alts]) if s is not None]
    if not picked:
        session.note_fallback("step", "agent_steps_in_order")
    return list(dict.fromkeys([s for s in picked if s in own] + own))


async def counterfactual(session: LLMSession, traj: Trajectory, header: str, graph: CausalGraph, step: int) -> dict[str, Any]:
    """Local + data-flow counterfactual on ``step``: would fixing it succeed, or was its input wrong?"""
    sources = graph.step_sources(step, "data")[-3:]
    ask = (
        f"Candidate decisive error: step {step}. Steps it takes data from: {sources or 'none'}.\n"
        "If step {0} had been done correctly, would the team have succeeded? Or was the data it used already "
        "wrong in an earlier step? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "fix_here_succeeds": "yes" or "no", "input_was_wrong": "yes" or "no", '
        '"source_step": <earlier step number or null>}'
    ).replace("{0}", str(step))

    def build(budget: int):
        shown = sorted({*sources, *range(max(0, step - 2), min(traj.n_steps, step + 3))})
        text, report = _log(traj, shown, budget - 300, focus={step})
        return messages(SYSTEM, f"{header}\n\nSteps:\n{text}\n\n{ask}"), report

    yes_no = s_enum(["yes", "no"])
    source = {"anyOf": [s_step(0, max(0, step - 1)), {"type": "null"}]}
    schema = s_obj(reason=s_text(), fix_here_succeeds=yes_no, input_was_wrong=yes_no, source_step=source)
    reply = await session.ask("counterfactual", build, meta={"attr_step": step, "attr_sources": sources}, schema=schema)
    obj = session.parse("counterfactual", reply) or {}
    src = resolve_step(traj, obj.get("source_step"))
    return {
        "step": step,
        "fix_here_succeeds": _yes(obj.get("fix_here_succeeds")),
        "input_was_wrong": _yes(obj.get("input_was_wrong")),
        "source_step": src if src is not None and src < step else None,
        "confidence": to_unit(obj.get("confidence"), None),
    }


# ------------------------------------------------------------------ screening


def screen_candidates(traj: Trajectory, graph: CausalGraph, candidates: list[int]) -> tuple[list[int], list[dict[str, Any]]]:
    """Deviation-aware pruning, then planning-control for loops; returns the screened order and a log."""
    log: list[dict[str, Any]] = []
    kept = []
    for c in candidates:
        fix = self_corrected(traj, c)
        if fix is not None and len(candidates) > 1:
            log.append({"step": c, "rule": "pruned_self_corrected", "by": fix})
            continue
        kept.append(c)
    kept = kept or list(candidates)
    out = []
    for c in kept:
        start = loop_start(graph, c)
        if start != c:
            log.append({"step": c, "rule": "loop_to_first_iteration", "to": start})
        out.append(start)
    return list(dict.fromkeys(out)), log


async def _counterfactual_walk(
    session: LLMSession, traj: Trajectory, header: str, graph: CausalGraph, screened: list[int]
) -> tuple[int, list[dict[str, Any]]]:
    """Up to MAX_HOPS counterfactual checks: follow corrupted inputs back, or drop a rejected first candidate."""
    step, hops = screened[0], []
    for _ in range(MAX_HOPS):
        cf = await counterfactual(session, traj, header, graph, step)
        hops.append(cf)
        if cf["input_was_wrong"] and cf["source_step"] is not None:
            step = cf["source_step"]  # data-flow: move to where the corrupted data came from
            continue
        if cf["fix_here_succeeds"] is False and len(screened) > 1 and step == screened[0]:
            step = screened[1]  # the local counterfactual rejects it: next candidate
            continue
        break
    return step, hops


async def _chief(traj: Trajectory, ctx: MethodContext) -> Prediction:
    session = new_session(ctx, "chief")
    header = case_header(traj, ctx.with_ground_truth)
    subtasks, how = await decompose(session, traj, header)
    graph = build_graph(traj, subtasks)
    verdicts, failed = [], None
    for sub in subtasks:
        v = await oracle(session, traj, header, graph, sub)
        verdicts.append({"subtask": sub.index, **v})
        if v["satisfied"] is False:
            failed = sub
            break
    if failed is None:
        # No subtask admitted failure: the last one did not deliver the right answer.
        failed = subtasks[-1]
        session.note_fallback("oracle", "no_failed_subtask_last")
    verdict = next((v for v in verdicts if v["subtask"] == failed.index), {})
    agent, agent_how = await pick_agent(session, traj, header, graph, failed, verdict)
    candidates = await pick_steps(session, traj, header, failed, agent)
    screened, screen_log = screen_candidates(traj, graph, candidates)
    step, hops = await _counterfactual_walk(session, traj, header, graph, screened)
    agent = display_agent(traj.steps[step].agent)  # data-flow hops may leave the agent picked above
    details = {
        "decomposition": how,
        "subtasks": [{"name": s.name, "start": s.start, "end": s.end} for s in subtasks],
        "oracles": verdicts,
        "failed_subtask": failed.index,
        "agent_choice": agent_how,
        "candidates": candidates,
        "screening": screen_log,
        "counterfactuals": hops,
        "edges": dict(Counter(f"{e['level']}:{e['type']}" for e in graph.edges)),
    }
    confident = hops and hops[-1]["fix_here_succeeds"] is True
    return finish(session, traj, agent, step, 0.7 if confident else 0.4, details)


@register_method("chief")
def chief() -> Method:
    """CHIEF (about 4-10 model calls per case)."""
    return _chief
