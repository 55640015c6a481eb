"""The three Who&When baselines: all-at-once, step-by-step, binary search.

Two prompt sets, chosen by the factory option ``prompts`` (``--method-option prompts=...``):

- ``paper`` (the default): the Who&When paper's prompts (its appendix G: G.1
  all-at-once, G.2 binary search, G.3 step-by-step; in our words,
  :mod:`attribution.methods._whowhen_paper`): free-text replies; step-by-step
  asks the paper's question about every step, the environment's (human,
  terminal) included; binary search shows only the segment under review and
  asks for "upper half" or "lower half", no reason;
- ``project``: our own prompts, described below.

Step-by-step with no step flagged (either prompt set) ends as the paper's
Algorithm 1 (appendix A.2) ends, at "No error found": no prediction (agent and
step None, counted wrong by every accuracy, ``details["no_error_found"]``);
``--method-option no_flag=heuristic`` puts the model-free guess of
:func:`attribution.llm.prompting.heuristic_guess` there instead (recorded as a
fallback).

- ``all_at_once``: the whole (fitted) log in one prompt; the model names the
  agent and the step.
- ``step_by_step``: the log is replayed step by step; at each actor step
  (the human and the terminal are not judged) the model says whether this
  step is the decisive error; the first "yes" wins.
- ``binary_search``: the candidate range is halved until one step is left;
  at each split the model says which half holds the decisive error. On an odd
  length the middle step goes to the FIRST (earlier) half: ``[lo, hi]`` splits
  into ``[lo, (lo+hi)//2]`` and ``[(lo+hi)//2 + 1, hi]``.

With ``project`` prompts each asks for a one-sentence reason before the answer field (small models
answer better after saying why) and parses the reply tolerantly; a reply with
no usable answer falls back to :func:`attribution.llm.prompting.heuristic_guess`
and the fallback is recorded in ``details["fallbacks"]``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attribution.methods._whowhen_paper as paper
from descriptor.errors import UserError
from attribution.llm.calls import CaseLedger, new_ledger
from attribution.methods.base import Method, MethodContext, Prediction, register_method
from attribution.llm.prompting import (
    ENVIRONMENT_KEYS,
    agent_names,
    case_header,
    display_agent,
    estimate_tokens,
    finish,
    heuristic_guess,
    messages,
    render_steps,
    resolve_actor,
    resolve_step,
    step_views,
    steps_of,
)
from attribution.llm.replies import Reply, YesNo, contract, one_of, schema_of, step_in, text
from attribution.sources.trajectory import Trajectory

SYSTEM = (
    "You review the log of a multi-agent team that failed its task. The decisive error is the earliest step "
    "whose mistake caused the failure. Be brief. Answer in JSON only."
)

JudgeReply = contract("JudgeReply", reason=text(), error=YesNo)
"""``step_by_step.judge_step``: is this step the decisive error?"""
HalveReply = contract("HalveReply", reason=text(), part=one_of(["A", "B"]))
"""``binary_search.halve``: which half holds the decisive error?"""
JUDGE_SCHEMA = schema_of(JudgeReply)
HALVE_SCHEMA = schema_of(HalveReply)


def answer_contract(traj: Trajectory) -> type[Reply]:
    """``all_at_once.answer``: the responsible agent (one of the log's actors) and the step."""
    return contract("AnswerReply", reason=text(), agent=one_of(agent_names(traj)), step=step_in(0, traj.n_steps - 1))


PROMPT_SETS = ("paper", "project")


def _prompt_set(prompts: str) -> str:
    if prompts not in PROMPT_SETS:
        raise UserError(f"--method-option prompts: expected one of {', '.join(PROMPT_SETS)}, got {prompts!r}")
    return prompts


def _agent_line(traj: Trajectory) -> str:
    return "Agents: " + ", ".join(agent_names(traj))


def _yes(value: Any, text: str) -> bool:
    """A yes/true answer from a parsed field, else from the reply text's first yes/no word."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value >= 0.5
    if isinstance(value, str) and value.strip():
        return value.strip().lower().startswith(("y", "true", "1"))
    m = re.search(r"\b(yes|no)\b", text or "", re.I)
    return bool(m and m.group(1).lower() == "yes")


# --------------------------------------------------------------- all at once


async def _all_at_once_paper(traj: Trajectory, ctx: MethodContext) -> Prediction:
    ledger = new_ledger(ctx, "all_at_once")

    def build(budget: int):
        empty = paper.all_at_once_prompt(traj, ctx.with_ground_truth, "")
        steps, report = render_steps(step_views(traj), budget - estimate_tokens(empty))
        return messages(paper.ALL_AT_ONCE_SYSTEM, paper.all_at_once_prompt(traj, ctx.with_ground_truth, steps)), report

    reply = await ledger.ask("answer", build, hints={"attr_prompts": "paper"})
    name, step_text, reason = paper.read_all_at_once(reply)
    if name is None or step_text is None:
        ledger.note_fallback("answer", "format")
    agent, step = resolve_actor(traj, name), resolve_step(traj, step_text)
    agent, step = _complete(ledger, traj, agent, step, reply)
    return finish(ledger, traj, agent, step, 0.5, {"prompts": "paper", "reason": reason[:300]})


async def _all_at_once(traj: Trajectory, ctx: MethodContext) -> Prediction:
    ledger = new_ledger(ctx, "all_at_once")
    header = case_header(traj, ctx.with_ground_truth)
    ask = (
        "Which agent made the decisive error, and at which step? Reply with JSON only:\n"
        '{"reason": "<one sentence>", "agent": "<agent name>", "step": <step number>}'
    )

    def build(budget: int):
        steps, report = render_steps(step_views(traj), budget - 200)
        user = f"{header}\n{_agent_line(traj)}\n\nLog (steps numbered from 0):\n{steps}\n\n{ask}"
        return messages(SYSTEM, user), report

    reply = await ledger.ask("answer", build, schema=schema_of(answer_contract(traj)))
    obj = ledger.parse("answer", reply) or {}
    agent, step = resolve_actor(traj, obj.get("agent")), resolve_step(traj, obj.get("step"))
    agent, step = _complete(ledger, traj, agent, step, reply)
    return finish(ledger, traj, agent, step, 0.5, {"prompts": "project", "reason": str(obj.get("reason", ""))[:300]})


def _complete(ledger: CaseLedger, traj: Trajectory, agent: str | None, step: int | None, reply: str):
    """Fill a missing agent or step from the other one, or from the reply text, or the heuristic."""
    if step is None and (m := re.search(r"step\D{0,3}(\d+)", reply or "", re.I)):
        step = resolve_step(traj, m.group(1))
    if agent is None and step is not None:
        agent = display_agent(traj.steps[step].agent)
    if step is None and agent is not None:
        own = steps_of(traj, agent)
        step = own[0] if own else None
        ledger.note_fallback("answer", "step_from_agent")
    if agent is None or step is None:
        agent, step = heuristic_guess(traj)
        ledger.note_fallback("answer", "heuristic")
    return agent, step


@register_method("all_at_once")
def all_at_once(prompts: str = "paper") -> Method:
    """One call over the whole fitted log; ``prompts``: ``paper`` (G.1) or ``project``."""
    return _all_at_once_paper if _prompt_set(prompts) == "paper" else _all_at_once


# --------------------------------------------------------------- step by step


NO_FLAG = ("none", "heuristic")
"""What step-by-step predicts when no step was flagged: nothing (the paper), or the heuristic guess."""


def _no_flag(no_flag: str) -> str:
    if no_flag not in NO_FLAG:
        raise UserError(f"--method-option no_flag: expected one of {', '.join(NO_FLAG)}, got {no_flag!r}")
    return no_flag


def _nothing_flagged(ledger: CaseLedger, traj: Trajectory, no_flag: str, details: dict[str, Any]) -> Prediction:
    """The end of a step-by-step pass that flagged no step: no prediction (the paper's "No error found"), or with
    ``no_flag="heuristic"`` the model-free guess, recorded as a fallback."""
    if no_flag == "heuristic":
        agent, step = heuristic_guess(traj)
        ledger.note_fallback("judge_step", "no_step_flagged_heuristic")
        return finish(ledger, traj, agent, step, 0.0, details)
    return finish(ledger, traj, None, None, 0.0, {**details, "no_error_found": True})


async def _step_by_step_paper(traj: Trajectory, ctx: MethodContext, no_flag: str = "none") -> Prediction:
    ledger = new_ledger(ctx, "step_by_step")
    verdicts: list[dict[str, Any]] = []
    for i in range(traj.n_steps):  # every step, the environment's too (G.3, Algorithm 1)
        agent = display_agent(traj.steps[i].agent)

        def build(budget: int, i: int = i):
            empty = paper.step_prompt(traj, ctx.with_ground_truth, "")
            steps, report = render_steps(step_views(traj, range(i + 1), focus={i}), budget - estimate_tokens(empty),
                                         focus={i})
            return messages(paper.STEP_SYSTEM, paper.step_prompt(traj, ctx.with_ground_truth, steps)), report

        reply = await ledger.ask("judge_step", build, hints={"attr_step": i, "attr_prompts": "paper"})
        flagged = paper.read_step_verdict(reply)
        if flagged is None:
            ledger.note_fallback("judge_step", "format_read_as_no")
        verdicts.append({"step": i, "error": bool(flagged)})
        if flagged:
            reason = reply.split("Reason:", 1)[-1].strip()
            return finish(ledger, traj, agent, i, 0.5, {"prompts": "paper", "verdicts": verdicts, "reason": reason[:300]})
    return _nothing_flagged(ledger, traj, no_flag, {"prompts": "paper", "verdicts": verdicts})


async def _step_by_step(traj: Trajectory, ctx: MethodContext, no_flag: str = "none") -> Prediction:
    ledger = new_ledger(ctx, "step_by_step")
    header = case_header(traj, ctx.with_ground_truth)
    verdicts: list[dict[str, Any]] = []
    # The environment (human, terminal) is not judged: its errors are attributed to the action before it.
    actors = [s.index for s in traj.steps if s.agent_key not in ENVIRONMENT_KEYS] or list(range(traj.n_steps))
    for i in actors:
        ask = (
            f"Is step [{i}] (by {display_agent(traj.steps[i].agent)}) the decisive error? Reply with JSON only:\n"
            '{"reason": "<one sentence>", "error": "yes" or "no"}'
        )

        def build(budget: int, i: int = i, ask: str = ask):
            steps, report = render_steps(step_views(traj, range(i + 1), focus={i}), budget - 200, focus={i})
            user = f"{header}\n\nLog up to the step under review:\n{steps}\n\n{ask}"
            return messages(SYSTEM, user), report

        reply = await ledger.ask("judge_step", build, hints={"attr_step": i}, schema=JUDGE_SCHEMA)
        obj = ledger.parse("judge_step", reply) or {}
        flagged = _yes(obj.get("error"), reply)
        verdicts.append({"step": i, "error": flagged})
        if flagged:
            agent = display_agent(traj.steps[i].agent)
            return finish(ledger, traj, agent, i, 0.5,
                          {"prompts": "project", "verdicts": verdicts, "reason": str(obj.get("reason", ""))[:300]})
    return _nothing_flagged(ledger, traj, no_flag, {"prompts": "project", "verdicts": verdicts})


@register_method("step_by_step")
def step_by_step(prompts: str = "paper", no_flag: str = "none") -> Method:
    """One call per step until the model flags one (at most ``n_steps`` calls); ``prompts``: ``paper`` (G.3) or
    ``project`` (the environment's steps not judged); ``no_flag``: what a pass that flags no step predicts,
    ``none`` (the paper's "No error found", Algorithm 1) or ``heuristic``."""
    run = _step_by_step_paper if _prompt_set(prompts) == "paper" else _step_by_step
    return functools.partial(run, no_flag=_no_flag(no_flag))


# --------------------------------------------------------------- binary search


def split_range(lo: int, hi: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Halves of the inclusive range ``[lo, hi]``; on odd lengths the middle step goes to the first half.

    >>> split_range(0, 4)
    ((0, 2), (3, 4))
    >>> split_range(3, 4)
    ((3, 3), (4, 4))
    """
    if hi <= lo:
        raise ValueError(f"cannot split a range of one step: [{lo}, {hi}]")
    mid = (lo + hi) // 2
    return (lo, mid), (mid + 1, hi)


async def _binary_search_paper(traj: Trajectory, ctx: MethodContext) -> Prediction:
    ledger = new_ledger(ctx, "binary_search")
    lo, hi = 0, traj.n_steps - 1
    path: list[dict[str, Any]] = []
    while lo < hi:
        (a0, a1), (b0, b1) = split_range(lo, hi)

        def build(budget: int, lo: int = lo, mid: int = a1, hi: int = hi):
            empty = paper.halve_prompt(traj, ctx.with_ground_truth, "", lo, mid, hi)
            segment, report = render_steps(step_views(traj, range(lo, hi + 1)), budget - estimate_tokens(empty))
            return messages(paper.HALVE_SYSTEM, paper.halve_prompt(traj, ctx.with_ground_truth, segment, lo, mid, hi)), report

        reply = await ledger.ask("halve", build, hints={"attr_range": [lo, a1, hi], "attr_prompts": "paper"})
        part = paper.read_half(reply)
        if part is None:
            part = paper.random_half(ctx.seed, traj.id, lo, hi)
            ledger.note_fallback("halve", "random_half")
        path.append({"range": [lo, hi], "part": part})
        lo, hi = (a0, a1) if part == "A" else (b0, b1)
    return finish(ledger, traj, display_agent(traj.steps[lo].agent), lo, 0.5, {"prompts": "paper", "path": path})


async def _binary_search(traj: Trajectory, ctx: MethodContext) -> Prediction:
    ledger = new_ledger(ctx, "binary_search")
    header = case_header(traj, ctx.with_ground_truth)
    lo, hi = 0, traj.n_steps - 1
    path: list[dict[str, Any]] = []
    while lo < hi:
        (a0, a1), (b0, b1) = split_range(lo, hi)
        ask = (
            f"The decisive error is somewhere in steps {lo}-{hi}. Is it in part A (steps {a0}-{a1}) "
            f"or part B (steps {b0}-{b1})? Reply with JSON only:\n"
            '{"reason": "<one sentence>", "part": "A" or "B"}'
        )
        focus = set(range(lo, hi + 1))

        def build(budget: int, ask: str = ask, focus: set[int] = focus, hi: int = hi):
            steps, report = render_steps(step_views(traj, range(hi + 1), focus=focus), budget - 200, focus=focus)
            user = f"{header}\n\nLog (steps numbered from 0):\n{steps}\n\n{ask}"
            return messages(SYSTEM, user), report

        reply = await ledger.ask("halve", build, hints={"attr_range": [lo, a1, hi]}, schema=HALVE_SCHEMA)
        part = _part(ledger, reply)
        path.append({"range": [lo, hi], "part": part})
        lo, hi = (a0, a1) if part == "A" else (b0, b1)
    agent = display_agent(traj.steps[lo].agent)
    return finish(ledger, traj, agent, lo, 0.5, {"prompts": "project", "path": path})


def _part(ledger: CaseLedger, reply: str) -> str:
    obj = ledger.parse("halve", reply) or {}
    value = str(obj.get("part", "")).strip().upper()
    if value[:1] in ("A", "B"):
        return value[:1]
    m = re.search(r"\bpart\s*([AB])\b", reply or "", re.I)
    if m:
        return m.group(1).upper()
    # Decisive errors sit early far more often than late: default to the earlier half.
    ledger.note_fallback("halve", "default_first_half")
    return "A"


@register_method("binary_search")
def binary_search(prompts: str = "paper") -> Method:
    """About log2(n_steps) calls; see :func:`split_range` for odd lengths; ``prompts``: ``paper`` (G.2, only the
    segment shown) or ``project`` (the log up to the range's end, with a reason)."""
    return _binary_search_paper if _prompt_set(prompts) == "paper" else _binary_search
